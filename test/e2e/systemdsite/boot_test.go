package systemdsite_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages"
)

// bootTimeout is the first boot to the default target at KVM speed; seed boot scales its
// timeout for TCG.
const bootTimeout = 90 * time.Second

// seedRun is a systemd OS's seed booted with seed boot, its NICs on the test's wire.
type seedRun struct {
	// work is seed boot's work directory: the seed's disk as it unpacked it, and the VM's
	// overlay on it.
	work string
	// msgs are the messages seed boot printed: the reconfiguration's steps and outcome,
	// then boot-complete with what the node reports.
	msgs []wire.Message
	macs []string
}

// bootSeed boots the seed in dir with the product's seed boot (stages.BootSeed) and the
// site medium, one NIC per spec, and returns once the seed has reconfigured and booted.
// seed boot holds the VM until the test ends, so the wire's peer can reach the node.
func bootSeed(t *testing.T, ctx context.Context, dir, iso string, nics []string) *seedRun {
	t.Helper()
	r := &seedRun{work: t.TempDir()}
	parsed, err := stagesNICs(nics)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range parsed {
		r.macs = append(r.macs, n.MAC)
	}
	work := r.work
	out := &watchWriter{match: "Seed reconfigured and booted", hit: make(chan struct{})}
	bctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- stages.BootSeed(bctx, stages.SeedBoot{Dir: dir, Work: work, SiteConfig: iso, NICs: parsed,
			MemoryMiB: 512, Timeout: bootTimeout + reconfigureTimeout, Hold: 24 * time.Hour, Accelerator: "auto", Out: out})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ended; err != nil {
			t.Errorf("seed boot, ended by the test: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(work, "console.log"))
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("seed boot printed:\n%s\nconsole:\n%s", out.text(), b)
		}
	})
	select {
	case <-out.hit:
	case err := <-ended:
		ended <- err
		t.Fatalf("seed boot ended before the seed booted: %v", err)
	}
	r.msgs = parseSteps(out.text())
	return r
}

// stagesNICs reads the NIC specs as seed boot's --nic does.
func stagesNICs(specs []string) ([]stages.NIC, error) {
	_, nics, err := stages.CheckSeedBootInputs("", nil, specs)
	return nics, err
}

// watchWriter keeps what seed boot prints and closes hit once a line holds match.
type watchWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	match string
	hit   chan struct{}
	seen  bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && strings.Contains(w.buf.String(), w.match) {
		w.seen = true
		close(w.hit)
	}
	return len(p), nil
}

func (w *watchWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// parseSteps reads seed boot's message lines ("  PHASE STATUS k=v k=v ..."; a value
// holding spaces continues over the words without "=").
func parseSteps(out string) []wire.Message {
	var msgs []wire.Message
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		m := wire.Message{Phase: f[0], Status: wire.Status(f[1]), Details: map[string]string{}}
		last := ""
		for _, w := range f[2:] {
			if k, v, ok := strings.Cut(w, "="); ok && k != "" {
				m.Details[k], last = v, k
			} else if last != "" {
				m.Details[last] += " " + w
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
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

// seedIsUnbooted: the seed's root, as seed boot unpacked its disk (work/disk.raw, the base
// the VM's overlay writes over), carries no machine-id and no SSH host keys: the seal
// cleared what the factory's boot made, so what the node reports was made by its boot at
// the site. Read with e2fsprogs' debugfs at the root partition's offset, not mounted.
func seedIsUnbooted(t *testing.T, work string) {
	t.Helper()
	raw := filepath.Join(work, "disk.raw")
	off, err := rootPartitionOffset(raw)
	if err != nil {
		t.Fatalf("the seed's disk as seed boot unpacked it: %v", err)
	}
	img := fmt.Sprintf("%s?offset=%d", raw, off)
	stat, err := exec.Command("debugfs", "-R", "stat /etc/machine-id", img).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Size: 0\b`).Match(stat) {
		t.Errorf("the seed's /etc/machine-id is not empty: %v: %s", err, stat)
	}
	ls, err := exec.Command("debugfs", "-R", "ls /etc/ssh", img).CombinedOutput()
	if err != nil || strings.Contains(string(ls), "ssh_host_") || !strings.Contains(string(ls), "sshd_config") {
		t.Errorf("the seed's /etc/ssh holds host keys (or could not be listed): %v: %s", err, ls)
	}
}

// rootPartitionOffset is the byte offset of the first Linux partition (type 0x83) in the
// MBR of the raw disk, where both the offline seed and the metal image keep the root.
func rootPartitionOffset(raw string) (int64, error) {
	f, err := os.Open(raw)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	mbr := make([]byte, 512)
	if _, err := io.ReadFull(f, mbr); err != nil {
		return 0, fmt.Errorf("reading the MBR of %s: %w", raw, err)
	}
	for i := range 4 {
		e := mbr[446+16*i : 446+16*(i+1)]
		if e[4] == 0x83 {
			return int64(binary.LittleEndian.Uint32(e[8:12])) * 512, nil
		}
	}
	return 0, fmt.Errorf("%s has no Linux partition in its MBR", raw)
}
