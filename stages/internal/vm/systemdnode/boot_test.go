package systemdnode_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/stages/internal/vm"
	"github.com/snofactory/snofactory/test/conformance"
)

// bootTimeout is the first boot to the default target at KVM speed; vm.Accelerator.Scale
// stretches it for TCG.
const bootTimeout = 90 * time.Second

// node is the systemd conformance OS booted on a test wire.
type node struct {
	m    *vm.Machine
	acc  vm.Accelerator
	os   conformance.SystemdOS
	macs []string
}

// bootNode boots the systemd OS (its root through a qcow2 overlay, so the image stays
// pristine) with two virtio NICs on w and the extra disks; the VM is stopped when the test
// ends.
func bootNode(t *testing.T, ctx context.Context, w *testWire, extra ...vm.Disk) *node {
	t.Helper()
	sys, err := conformance.CachedSystemd(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := vm.ResolveAccel(ctx, "qemu-system-x86_64", vm.AccelAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	overlay := filepath.Join(dir, "root.qcow2")
	if err := vm.CreateOverlay(ctx, sys.Root, "raw", overlay); err != nil {
		t.Fatal(err)
	}
	n := &node{acc: acc, os: sys, macs: []string{"52:54:00:5f:00:01", "52:54:00:5f:00:02"}}
	cfg := vm.Config{
		Name: "systemd-node", QemuBinary: w.qemu, MemoryMiB: 512,
		Disks:      append([]vm.Disk{{Path: overlay, Format: "qcow2"}}, extra...),
		ConsoleLog: filepath.Join(dir, "console.log"),
		ExtraArgs:  append([]string{"-kernel", sys.Kernel, "-initrd", sys.Initrd, "-append", sys.Kargs}, w.nicArgs(n.macs)...),
	}
	if n.m, err = vm.Start(ctx, cfg, acc, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.m.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(cfg.ConsoleLog)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("console of %s:\n%s", cfg.Name, b)
		}
	})
	return n
}

// checkFirstBoot: systemd reached its default target with no failed unit, the boot made
// the machine-id and the SSH host keys the sealed image does not carry (as RHCOS's first
// boot does), sshd, chronyd and NetworkManager run.
func checkFirstBoot(t *testing.T, d map[string]string) {
	t.Helper()
	// An empty /etc/machine-id, as the image (and a sealed seed) carries, gets a new ID but is
	// not a first boot (machine-id(5), "First Boot Semantics"): presets are not re-applied,
	// which the seal counts on (seeds/node/agent seal_plan.go machineIDAction).
	want := map[string]string{"target": "active", "failed": "", "firstboot": "no", "sshd": "active",
		"chronyd": "active", "networkmanager": "active", "mode": "systemd"}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("%s = %q, want %q (failed units: %s)", k, d[k], v, d["failed_why"])
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(d["machine_id"]) {
		t.Errorf("machine-id %q is not one systemd made", d["machine_id"])
	}
	for _, k := range []string{"rsa", "ecdsa", "ed25519"} {
		if !regexp.MustCompile(`(^|,)` + k + `:SHA256:`).MatchString(d["ssh_host_keys"]) {
			t.Errorf("no %s host key made at the first boot: %q", k, d["ssh_host_keys"])
		}
	}
}

// checkNICs: the guest has exactly the test's two virtio NICs, and NetworkManager manages
// each as an ethernet device.
func checkNICs(t *testing.T, d map[string]string, macs []string) {
	t.Helper()
	nics := strings.Split(d["nics"], ",")
	if len(nics) != len(macs) {
		t.Fatalf("NICs %q, want %d", d["nics"], len(macs))
	}
	for _, mac := range macs {
		var name string
		for _, nic := range nics {
			if n, rest, _ := strings.Cut(nic, "="); rest == mac+"/virtio_net" {
				name = n
			}
		}
		if name == "" {
			t.Errorf("no virtio_net NIC with MAC %s in %q", mac, d["nics"])
			continue
		}
		found := false
		for _, dev := range strings.Split(d["nm_devices"], ",") {
			f := strings.Split(dev, ":")
			if len(f) == 3 && f[0] == name {
				found = f[1] == "ethernet" && f[2] != "unmanaged"
			}
		}
		if !found {
			t.Errorf("NetworkManager does not manage %s as ethernet: %q", name, d["nm_devices"])
		}
	}
}

// imageIsUnbooted: the root image carries no machine-id and no SSH host keys, so what the
// node reports was made by its first boot (read with e2fsprogs' debugfs, not mounted).
func imageIsUnbooted(t *testing.T, img string) {
	t.Helper()
	stat, err := exec.Command("debugfs", "-R", "stat /etc/machine-id", img).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Size: 0\b`).Match(stat) {
		t.Errorf("the image's /etc/machine-id is not empty: %v: %s", err, stat)
	}
	ls, err := exec.Command("debugfs", "-R", "ls /etc/ssh", img).CombinedOutput()
	if err != nil || strings.Contains(string(ls), "ssh_host_") || !strings.Contains(string(ls), "sshd_config") {
		t.Errorf("the image's /etc/ssh holds host keys (or could not be listed): %v: %s", err, ls)
	}
}
