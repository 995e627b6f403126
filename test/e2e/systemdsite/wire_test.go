package systemdsite_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// testWire is a simulated network the test owns: a network namespace holding a bridge.
// Each of the seed's NICs is a qemu dgram netdev on a unix socket pair whose other end the
// test relays to a tap on the bridge, so qemu runs as seed boot starts it and nothing
// touches the host's own network; the namespace and all in it go when the test ends.
type testWire struct {
	ns string
	// sockDir holds the NICs' sockets (short: a unix socket path has at most 107 bytes).
	sockDir string
}

// newTestWire makes the namespace with a bridge.
func newTestWire(t *testing.T) *testWire {
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
	dir, err := os.MkdirTemp("", "sfsysd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.sockDir = dir
	return w
}

// plugNIC plugs the seed's i-th NIC into the bridge and returns its seed boot --nic spec: a
// qemu dgram netdev (qemu net/dgram.c net_init_dgram: one datagram per Ethernet frame, no
// length prefix) from its own unix socket to the test's, whose frames the test passes to
// and from a tap "nicI" on the bridge. Until qemu binds its socket the test's writes fail
// and the frames are dropped, as on a cable not yet plugged in.
func (w *testWire) plugNIC(t *testing.T, i int) string {
	t.Helper()
	guest := filepath.Join(w.sockDir, fmt.Sprintf("nic%d-qemu", i))
	wireEnd := filepath.Join(w.sockDir, fmt.Sprintf("nic%d-wire", i))
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: wireEnd, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	tapName := fmt.Sprintf("nic%d", i)
	var tap *os.File
	if err := w.inNetns(func() (err error) { tap, err = openTap(tapName); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); tap.Close() })
	ip(t, "-n", w.ns, "link", "set", tapName, "master", "br0", "up")
	to := &net.UnixAddr{Name: guest, Net: "unixgram"}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			tap.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := tap.Read(buf)
			if err != nil {
				return
			}
			conn.WriteToUnix(buf[:n], to)
		}
	}()
	return "dgram,local.type=unix,local.path=" + guest + ",remote.type=unix,remote.path=" + wireEnd
}

// addPeer puts a peer on the wire, a host on an access port of the site's VLAN: a tap
// "peer0" holding the given addresses (CIDR), whose untagged frames a relay of the test's
// own tags with the VLAN and passes to a tap "trunk0" on the bridge, and back, untagged.
// The relay stands in for a switch's access port because the host kernel may have neither
// VLAN devices (8021q) nor a VLAN-filtering bridge. Taps the test opens carry whole frames:
// without TUNSETOFFLOAD the kernel checksums and segments them first (drivers/net/tun.c).
func (w *testWire) addPeer(t *testing.T, vlan int, cidrs ...string) {
	t.Helper()
	var peer, trunk *os.File
	err := w.inNetns(func() (err error) {
		if peer, err = openTap("peer0"); err != nil {
			return err
		}
		trunk, err = openTap("trunk0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close(); trunk.Close() })
	ip(t, "-n", w.ns, "link", "set", "trunk0", "master", "br0", "up")
	ip(t, "-n", w.ns, "link", "set", "peer0", "up")
	for _, c := range cidrs {
		// nodad: the address is usable at once, not after IPv6's duplicate detection.
		ip(t, "-n", w.ns, "addr", "add", c, "dev", "peer0", "nodad")
	}
	go relay(peer, trunk, func(f []byte) []byte { return tagFrame(f, vlan) })
	go relay(trunk, peer, func(f []byte) []byte { return untagFrame(f, vlan) })
}

// relay copies each frame read from src to dst through edit (nil drops it), until src is
// closed.
func relay(src, dst *os.File, edit func([]byte) []byte) {
	buf := make([]byte, 65536)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if f := edit(buf[:n]); f != nil {
			dst.Write(f)
		}
	}
}

// tagFrame inserts an IEEE 802.1Q tag with vid after the MAC addresses.
func tagFrame(f []byte, vid int) []byte {
	if len(f) < 14 {
		return nil
	}
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = append(out, 0x81, 0x00, byte(vid>>8)&0x0f, byte(vid))
	return append(out, f[12:]...)
}

// untagFrame strips the 802.1Q tag of a frame of VLAN vid and drops every other frame.
func untagFrame(f []byte, vid int) []byte {
	if len(f) < 18 || f[12] != 0x81 || f[13] != 0x00 || int(f[14]&0x0f)<<8|int(f[15]) != vid {
		return nil
	}
	return append(append([]byte{}, f[:12]...), f[16:]...)
}

// openTap makes the tap name in the calling thread's network namespace and returns its
// frames' end, non-blocking so that Close ends a pending Read.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("making tap %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// listen opens a TCP listener inside the namespace; a socket belongs to the namespace it
// was made in, so it keeps serving there from any thread.
func (w *testWire) listen(addr string) (l net.Listener, err error) {
	err = w.inNetns(func() error {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// inNetns runs fn in a thread that entered the namespace (setns(2)). The thread is never
// unlocked, so the runtime ends it with its goroutine instead of reusing it there.
func (w *testWire) inNetns(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/run/netns", w.ns))
		if err != nil {
			ch <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("entering network namespace %s: %w", w.ns, err)
			return
		}
		ch <- fn()
	}()
	return <-ch
}

func ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
