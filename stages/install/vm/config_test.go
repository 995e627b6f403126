package vm

import (
	"slices"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	rp := runtimePaths{AgentSocket: "/tmp/s/agent.sock", QMPSocket: "/tmp/s/qmp.sock", OVMFCode: "/fw/code.fd", OVMFVars: "/tmp/s/vars.fd"}
	tests := []struct {
		name     string
		cfg      Config
		acc      Accelerator
		want     []string // each must appear as consecutive arguments
		wantNot  []string
		validErr string
	}{
		{
			name: "bios iso tcg defaults",
			cfg:  Config{ISO: "/x/live.iso", ConsoleLog: "/x/console.log"},
			acc:  TCG("test"),
			want: []string{
				"-accel tcg", "-m 1024", "-smp 1", "-nodefaults", "-display none",
				"-serial file:/x/console.log",
				"-drive file=/x/live.iso,media=cdrom,if=ide,readonly=on",
				"-chardev socket,id=agent0,path=/tmp/s/agent.sock",
				"-device virtserialport,bus=vser0.0,chardev=agent0,name=org.snofactory.agent.0",
				"-qmp unix:/tmp/s/qmp.sock,server=on,wait=off",
			},
			wantNot: []string{"-no-reboot", "-cpu host", "if=pflash", "-boot"},
		},
		{
			name: "kvm uefi disks no-reboot",
			cfg: Config{Name: "f1", ISO: "/x/live.iso", ConsoleLog: "/c", MemoryMiB: 4096, CPUs: 2,
				Firmware: FirmwareUEFI, NoReboot: true, BootOrder: "cd", AgentPort: "p1",
				Disks: []Disk{{Path: "/d/root.qcow2"}, {Path: "/d/data.img", Format: "raw", ReadOnly: true, Serial: "precache"}}},
			acc: Accelerator{Name: AccelKVM, TimeoutScale: 1},
			want: []string{
				"-name f1", "-accel kvm", "-cpu host", "-m 4096", "-smp 2", "-no-reboot", "-boot order=cd",
				"-drive if=pflash,format=raw,unit=0,readonly=on,file=/fw/code.fd",
				"-drive if=pflash,format=raw,unit=1,file=/tmp/s/vars.fd",
				"-drive file=/d/root.qcow2,format=qcow2,if=none,id=disk0", "-device virtio-blk-pci,drive=disk0",
				"-drive file=/d/data.img,format=raw,if=none,id=disk1,readonly=on", "-device virtio-blk-pci,drive=disk1,serial=precache",
				"-device virtserialport,bus=vser0.0,chardev=agent0,name=p1",
			},
		},
		{name: "nothing to boot", cfg: Config{ConsoleLog: "/c"}, validErr: "nothing to boot"},
		{name: "comma in path", cfg: Config{ISO: "/a,b.iso", ConsoleLog: "/c"}, validErr: "comma"},
		{name: "bad firmware", cfg: Config{ISO: "/a.iso", ConsoleLog: "/c", Firmware: "coreboot"}, validErr: "firmware"},
		{name: "no console", cfg: Config{ISO: "/a.iso"}, validErr: "console"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if tt.validErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.validErr) {
					t.Fatalf("validate: got %v, want error containing %q", err, tt.validErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			args := tt.cfg.args(tt.acc, rp)
			joined := " " + strings.Join(args, " ") + " "
			for _, w := range tt.want {
				if !strings.Contains(joined, " "+w+" ") {
					t.Errorf("missing %q in %v", w, args)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(joined, w) {
					t.Errorf("unexpected %q in %v", w, args)
				}
			}
			if i := slices.Index(args, "-serial"); i < 0 {
				t.Errorf("no serial console in %v", args)
			}
		})
	}
}
