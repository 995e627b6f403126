package systemdnode_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testWire is a simulated network the test owns: a network namespace holding a bridge
// and one tap per guest NIC. qemu runs inside the namespace (QemuBinary is a wrapper that
// enters it), so nothing touches the host's own network; the namespace and all in it go
// when the test ends.
type testWire struct {
	ns, qemu string
	taps     []string
}

// newTestWire makes the namespace with a bridge and n taps on it.
func newTestWire(t *testing.T, n int) *testWire {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: making a network namespace with taps needs root; make test runs as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip not found: install the Debian package iproute2: %v", err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	w := &testWire{ns: "sfsysd-" + hex.EncodeToString(suffix)}
	ip(t, "netns", "add", w.ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", w.ns).CombinedOutput(); err != nil {
			t.Errorf("removing network namespace %s: %v: %s", w.ns, err, out)
		}
	})
	ip(t, "-n", w.ns, "link", "add", "br0", "type", "bridge")
	ip(t, "-n", w.ns, "link", "set", "br0", "up")
	for i := range n {
		tap := "tap" + string(rune('0'+i))
		ip(t, "-n", w.ns, "tuntap", "add", "dev", tap, "mode", "tap")
		ip(t, "-n", w.ns, "link", "set", tap, "master", "br0", "up")
		w.taps = append(w.taps, tap)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64 not found: install the Debian package qemu-system-x86 (make deps): %v", err)
	}
	w.qemu = filepath.Join(t.TempDir(), "qemu-in-netns")
	script := "#!/bin/sh\nexec ip netns exec " + w.ns + " " + qemu + " \"$@\"\n"
	if err := os.WriteFile(w.qemu, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// nicArgs are qemu's arguments for one virtio NIC per tap, with the given MACs.
func (w *testWire) nicArgs(macs []string) []string {
	var a []string
	for i, tap := range w.taps {
		id := "net" + string(rune('0'+i))
		a = append(a, "-netdev", "tap,id="+id+",ifname="+tap+",script=no,downscript=no",
			"-device", "virtio-net-pci,netdev="+id+",mac="+macs[i])
	}
	return a
}

func ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
