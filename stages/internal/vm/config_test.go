package vm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/seeds/contract/wire"
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
				// qemu64, TCG's default CPU, is not x86-64-v2: RHEL 9 kernels stop on it.
				"-accel tcg", "-cpu max", "-m 1024", "-smp 1", "-nodefaults", "-display none",
				"-chardev file,id=console0,path=/x/console.log", "-serial chardev:console0",
				"-drive file=/x/live.iso,media=cdrom,if=ide,readonly=on",
				"-chardev socket,id=agent0,path=/tmp/s/agent.sock",
				"-device virtserialport,bus=vser0.0,chardev=agent0,name=org.snofactory.agent.0",
				"-qmp unix:/tmp/s/qmp.sock,server=on,wait=off",
			},
			wantNot: []string{"-no-reboot", "-cpu host", "-cpu qemu64", "if=pflash", "-boot", "gather0"},
		},
		{
			name: "discard passes fstrim through",
			cfg:  Config{ISO: "/x/live.iso", ConsoleLog: "/c", Disks: []Disk{{Path: "/d/w.qcow2", Discard: true}}},
			acc:  TCG("test"),
			want: []string{"-drive file=/d/w.qcow2,format=qcow2,if=none,id=disk0,discard=unmap,detect-zeroes=unmap"},
		},
		{
			name: "the machine's serial number",
			cfg:  Config{ISO: "/x/live.iso", ConsoleLog: "/c", SystemSerial: "CZ,2345"},
			acc:  TCG("test"),
			want: []string{"-smbios type=1,serial=CZ,,2345"},
		},
		{
			name: "gather port to a file",
			cfg:  Config{ISO: "/x/live.iso", ConsoleLog: "/c", GatherFile: "/g,h/gather.bin"},
			acc:  TCG("test"),
			want: []string{"-chardev file,id=gather0,path=/g,,h/gather.bin",
				"-device virtserialport,bus=vser0.0,chardev=gather0,name=org.snofactory.gather.0"},
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
		{
			name: "user network forwards the API port on loopback only",
			cfg:  Config{ISO: "/x/live.iso", ConsoleLog: "/c", Network: &UserNetwork{Forwards: []Forward{{HostPort: 46443, GuestPort: 6443}, {HostPort: 42222, GuestPort: 22}, {HostPort: 48080, GuestPort: 8080, GuestAddr: "10.0.2.50"}}}},
			acc:  TCG("test"),
			want: []string{
				"-netdev user,id=net0,hostfwd=tcp:127.0.0.1:46443-:6443,hostfwd=tcp:127.0.0.1:42222-:22,hostfwd=tcp:127.0.0.1:48080-10.0.2.50:8080",
				"-device virtio-net-pci,netdev=net0",
			},
		},
		{
			name: "boot indexes: the target disk first, then the ISO (UEFI ignores -boot)",
			cfg: Config{ISO: "/x/live.iso", ConsoleLog: "/c", Firmware: FirmwareUEFI, ISOBootIndex: 2,
				Disks: []Disk{{Path: "/d/t.qcow2", Serial: "t", BootIndex: 1}, {Path: "/d/data.img", Format: "raw", ReadOnly: true}}},
			acc: TCG("test"),
			want: []string{"-device virtio-blk-pci,drive=disk0,serial=t,bootindex=1", "-global ide-cd.bootindex=2",
				"-device virtio-blk-pci,drive=disk1"},
		},
		{
			name: "NICs on their own backends, in slots from 0x10, beside the user network",
			cfg: Config{ISO: "/x/live.iso", ConsoleLog: "/c", Network: &UserNetwork{},
				NICs: []NIC{{Netdev: "tap,ifname=tap0,script=no,downscript=no", MAC: "52:54:00:5f:00:01"}, {Netdev: "socket,connect=127.0.0.1:5000"}}},
			acc: TCG("test"),
			want: []string{
				"-netdev user,id=net0", "-device virtio-net-pci,netdev=net0",
				"-netdev tap,ifname=tap0,script=no,downscript=no,id=nic0", "-device virtio-net-pci,netdev=nic0,addr=0x10,mac=52:54:00:5f:00:01",
				"-netdev socket,connect=127.0.0.1:5000,id=nic1", "-device virtio-net-pci,netdev=nic1,addr=0x11",
			},
		},
		{name: "more NICs than slots", cfg: Config{ISO: "/a.iso", ConsoleLog: "/c", NICs: make([]NIC, 17)}, validErr: "17 NICs: the machine has slots for 16"},
		{name: "no network by default", cfg: Config{ISO: "/x/live.iso", ConsoleLog: "/c"}, acc: TCG("test"), wantNot: []string{"-netdev", "virtio-net-pci"}},
		{name: "nothing to boot", cfg: Config{ConsoleLog: "/c"}, validErr: "nothing to boot"},
		{
			// a comma ends an option value unless doubled: unescaped, these
			// paths would add options (",readonly=off") or break the command line
			name: "commas are escaped",
			cfg: Config{Name: "a,b", ISO: "/i,format=raw.iso", ConsoleLog: "/c,d/console.log", AgentPort: "p,q",
				Disks: []Disk{{Path: "/d,readonly=off/root.img", Format: "raw", ReadOnly: true, Serial: "s,n"}}},
			acc: TCG("test"),
			want: []string{
				"-name a,,b",
				"-chardev file,id=console0,path=/c,,d/console.log",
				"-drive file=/i,,format=raw.iso,media=cdrom,if=ide,readonly=on",
				"-drive file=/d,,readonly=off/root.img,format=raw,if=none,id=disk0,readonly=on",
				"-device virtio-blk-pci,drive=disk0,serial=s,,n",
				"-device virtserialport,bus=vser0.0,chardev=agent0,name=p,,q",
			},
		},
		{name: "serial too long for virtio-blk", cfg: Config{ISO: "/a.iso", ConsoleLog: "/c", Disks: []Disk{{Path: "/d", Serial: "snofactory-target-disk-0"}}}, validErr: "longer than the 20 bytes"},
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

// TestCommaPathsReachQemu boots the probe guest from a disk in a directory whose
// name holds commas, with the console, the runtime sockets (TMPDIR) and the disk
// all under it: qemu must open exactly those paths and run the guest to its exit.
func TestCommaPathsReachQemu(t *testing.T) {
	requireQemu(t)
	dir := filepath.Join(t.TempDir(), "a,b,readonly=on")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	img := filepath.Join(dir, "probe,1.img")
	// SeaBIOS cannot read a virtio disk of a single sector: pad it.
	disk := make([]byte, 1<<20)
	copy(disk, probeGuest)
	if err := os.WriteFile(img, disk, 0o600); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(dir, "console,1.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Start(ctx, Config{Name: "comma,test", Disks: []Disk{{Path: img, Format: "raw", Serial: "x,y"}},
		MemoryMiB: 128, ConsoleLog: console, BootOrder: "c", NoReboot: true,
		ExtraArgs: []string{"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"}}, TCG("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	var last Event
	for ev := range m.Events() {
		last = ev
	}
	var ee *exec.ExitError
	if !last.Exited || !errors.As(last.ExitErr, &ee) || ee.ExitCode() != probeExitStatus {
		t.Fatalf("qemu ended with %v, want the probe guest's exit status %d", last.ExitErr, probeExitStatus)
	}
	if _, err := os.Stat(console); err != nil {
		t.Errorf("console log not at its path: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ",,") {
			t.Errorf("qemu created %q: a doubled comma reached the file system", e.Name())
		}
	}
}

// The du-profile installs to the disk the factory VM presents as its target: install
// attaches it with wire.TargetDiskSerial, the guest's udev names it by that serial, and the
// profile names that, not a PCI slot that follows qemu's argument order.
func TestProfileInstallDiskIsTheTargetDisk(t *testing.T) {
	bp, err := blueprints.LoadFile(filepath.Join("..", "..", "..", "blueprints", "du-profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	target := Disk{Path: "/d/target.qcow2", Serial: wire.TargetDiskSerial, BootIndex: 1}
	if got, want := bp.Spec.OpenShift.InstallDisk, target.GuestPath(); got != want {
		t.Fatalf("du-profile installs to %s; the factory VM's target disk is %s", got, want)
	}
	cfg := Config{ISO: "/x/live.iso", ConsoleLog: "/c", Disks: []Disk{target, {Path: "/d/precache.img", Format: "raw", ReadOnly: true, Serial: wire.PrecacheDiskSerial}}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cfg.args(TCG("test"), runtimePaths{}), " ")
	if !strings.Contains(joined, "-device virtio-blk-pci,drive=disk0,serial="+wire.TargetDiskSerial+",") {
		t.Errorf("the target disk does not carry its serial: %s", joined)
	}
}
