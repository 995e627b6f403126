package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/test/faultproxy"
	"github.com/snofactory/snofactory/test/registry"
)

// multiGiBSeed writes a seed whose chunked disk is 2 GiB with 512 MiB of incompressible
// data in four runs, as a sealer would: pack, index, seed.json.
func multiGiBSeed(t *testing.T) (string, *seed.Manifest) {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 30))
	buf := make([]byte, 1<<20)
	for run := int64(0); run < 4; run++ {
		w := bufio.NewWriterSize(&offsetWriter{f: f, off: run * 512 << 20}, 4<<20)
		for range 128 {
			for i := 0; i < len(buf); i += 8 {
				v := r.Uint64()
				for j := range 8 {
					buf[i+j] = byte(v >> (8 * j))
				}
			}
			w.Write(buf)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	dir := filepath.Join(t.TempDir(), "seed")
	os.MkdirAll(dir, 0o755)
	sums, err := diskpack.PackFiles(context.Background(), raw, filepath.Join(dir, "disk.pack"), filepath.Join(dir, "disk.index"), diskpack.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(raw)
	d, err := seed.DescribeChunked(dir, "disk.pack", "disk.index", sums)
	if err != nil {
		t.Fatal(err)
	}
	m := &seed.Manifest{SchemaVersion: seed.SchemaVersion, Name: "big", Target: oskind.CoreOS, Firmware: seed.FirmwareBIOS,
		BlueprintDigest: d.RawDigest, LockDigest: d.RawDigest, ReconfigurationAPIVersion: "snofactory.io/v1alpha1",
		Created: time.Unix(0, 0).UTC(), Tools: map[string]string{"test": "1"}, Images: []seed.Image{}, Disks: []seed.Disk{d}}
	if err := seed.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

type offsetWriter struct {
	f   *os.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// TestSeedTransfersSurviveKills kills seed push, pull and write five times each on a
// multi-GiB seed, pushed as pack blobs of at most diskpack.MaxPackBlob. Every kill lands on
// an event: a fault proxy between the CLI and the registry holds pack blobs half-way
// (packHold), and the CLI is killed once all its slots hold one, so each kill is
// mid-transfer and each run has moved exactly a known set of pack blobs whole. Each later
// run moves only the pack blobs that had not finished, and the result is the seed byte
// for byte; a write killed while writing the disk leaves no partial file once run again.
func TestSeedTransfersSurviveKills(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	reg := registry.StartT(t, registry.Options{})
	src, m := multiGiBSeed(t)
	packs := packBlobs(t, src, m)
	total, kills := len(packs), 5
	// Each killed run lets pass pack blobs through and holds DefaultJobs more: the last
	// killed run needs that many left.
	pass := (total - ociseed.DefaultJobs) / (kills + 1)
	if pass < 1 {
		t.Fatalf("the seed has %d pack blobs: too few for %d kills of %d in flight", total, kills, ociseed.DefaultJobs)
	}
	t.Logf("seed: %d pack blobs, %d MiB stored; each killed run lets %d through", total, m.Disks[0].Size>>20, pass)
	h := &packHold{packs: packs}
	proxy, err := faultproxy.Start(t.Context(), reg.Addr(), faultproxy.Options{Hold: h.hold, Held: h.onHeld})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	tmp := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp)
	ref := proxy.Addr() + "/seeds/big:1"
	run := func(method string, args ...string) (string, map[string]bool) {
		t.Helper()
		h.arm(method, total+1) // nothing held: the run's pack blobs are only counted
		cmd := exec.Command(snofactoryBin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		moved := h.release()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), moved
	}

	done := killRuns(t, h, http.MethodPut, env, kills, pass, "seed", "push", src, ref)
	for d := range done {
		if !storedIn(reg, d) {
			t.Errorf("push: pack blob %s went through whole before a kill but the registry lacks it", d)
		}
	}
	out, moved := run(http.MethodPut, "seed", "push", src, ref)
	checkNotAgain(t, total, done, moved, "push", out)

	dst := filepath.Join(t.TempDir(), "pulled")
	done = killRuns(t, h, http.MethodGet, env, kills, pass, "seed", "pull", ref, dst)
	out, moved = run(http.MethodGet, "seed", "pull", ref, dst)
	checkNotAgain(t, total, done, moved, "pull", out)
	for _, f := range []string{"seed.json", "disk.pack", "disk.index"} {
		_, a, _ := seed.FileDigest(context.Background(), filepath.Join(src, f))
		_, b, _ := seed.FileDigest(context.Background(), filepath.Join(dst, f))
		if a != b || a == "" {
			t.Errorf("pulled %s differs", f)
		}
	}

	// write: four kills while it pulls, one once it has begun writing the disk
	disk := filepath.Join(t.TempDir(), "disk.img")
	done = killRuns(t, h, http.MethodGet, env, kills-1, pass, "seed", "write", "--image", ref, "--device", disk)
	started, stop := writeStarted(t, filepath.Dir(disk), ".disk.img.partial-")
	h.arm(http.MethodGet, total+1)
	killOn(t, env, started, "seed", "write", "--image", ref, "--device", disk)
	stop()
	for d := range h.release() {
		done[d] = true
	}
	if p, _ := filepath.Glob(filepath.Join(filepath.Dir(disk), ".disk.img.partial-*")); len(p) == 0 {
		t.Errorf("write: killed once it began writing the disk, yet no partial file is left: the kill did not land mid-write")
	}
	out, moved = run(http.MethodGet, "seed", "write", "--image", ref, "--device", disk)
	checkNotAgain(t, total, done, moved, "write", out)
	if out, _ := run(http.MethodGet, "seed", "verify", src, "--device", disk); !strings.Contains(out, "complete") {
		t.Errorf("verify --device: %s", out)
	}
	if p, _ := filepath.Glob(filepath.Join(filepath.Dir(disk), ".*partial*")); len(p) > 0 {
		t.Errorf("partial files left: %v", p)
	}
	if p, _ := filepath.Glob(filepath.Join(tmp, "snofactory-*")); len(p) > 0 {
		t.Errorf("staging left in TMPDIR: %v", p)
	}
}

// storedIn says whether the registry's storage holds blob d whole.
func storedIn(reg *registry.Registry, d string) bool {
	x := strings.TrimPrefix(d, "sha256:")
	return fileSizeOf(filepath.Join(reg.StorageDir(), "docker/registry/v2/blobs/sha256", x[:2], x, "data")) > 0
}

// killOn runs the CLI and kills it (SIGKILL: no cleanup runs) once at is closed; a
// command that ends first fails the test, as its kill point was never reached.
func killOn(t *testing.T, env []string, at <-chan struct{}, args ...string) {
	t.Helper()
	cmd := exec.Command(snofactoryBin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("%s ended (%v) before its kill point:\n%s", strings.Join(args, " "), err, out.String())
	case <-at:
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// packHold picks, through the fault proxy, where a run is killed: it lets the first pass
// pack blobs a run moves go through, and holds every later one half-way (faultproxy
// Options.Hold). Once DefaultJobs are held, every slot of the client holds a held blob,
// so the pack blobs let through have all finished and nothing else moves: the kill lands
// there, mid-transfer, with exactly pass more pack blobs done.
type packHold struct {
	packs  map[string]int64
	method string // what moves a pack blob: PUT (push) or GET (pull)

	mu     sync.Mutex
	pass   int
	order  map[string]int // digest -> its place among the pack blobs of this run
	gate   chan struct{}  // nil: nothing is held
	held   int
	full   chan struct{} // closed once DefaultJobs are held
	passed map[string]bool
}

// digest is the pack blob r moves, or "".
func (h *packHold) digest(r *http.Request) string {
	if r.Method != h.method {
		return ""
	}
	d := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	if r.Method == http.MethodPut {
		d = r.URL.Query().Get("digest")
	}
	if _, ok := h.packs[d]; !ok {
		return ""
	}
	return d
}

// arm starts a run that moves pack blobs by method and lets pass of them through; the
// channel is its kill point.
func (h *packHold) arm(method string, pass int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.method, h.pass, h.order, h.held, h.passed = method, pass, map[string]int{}, 0, map[string]bool{}
	h.gate, h.full = make(chan struct{}), make(chan struct{})
	return h.full
}

// release ends the run: the held requests' connections drop, and nothing more is held.
// It returns the pack blobs the run let through.
func (h *packHold) release() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.gate)
	h.gate = nil
	return h.passed
}

func (h *packHold) hold(r *http.Request) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.digest(r)
	if d == "" || h.gate == nil {
		return nil
	}
	n, ok := h.order[d]
	if !ok {
		n = len(h.order) + 1
		h.order[d] = n
	}
	if n <= h.pass {
		h.passed[d] = true
		return nil
	}
	return h.gate
}

func (h *packHold) onHeld(*http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held++; h.held == ociseed.DefaultJobs {
		close(h.full)
	}
}

// killRuns runs args n times, each killed by h (method) once pass more pack blobs are
// done, and returns the pack blobs done.
func killRuns(t *testing.T, h *packHold, method string, env []string, n, pass int, args ...string) map[string]bool {
	t.Helper()
	done := map[string]bool{}
	for range n {
		killOn(t, env, h.arm(method, pass), args...)
		for d := range h.release() {
			if done[d] {
				t.Errorf("%s: a run moved pack blob %s again after an earlier run had moved it whole", args[1], d)
			}
			done[d] = true
		}
	}
	return done
}

// writeStarted is closed once a file named prefix* in dir is first written: an inotify
// IN_MODIFY event, the moment the write has begun. stop ends the watch.
func writeStarted(t *testing.T, dir, prefix string) (started <-chan struct{}, stop func()) {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MODIFY); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	// A non-blocking descriptor goes through the runtime's poller, so Close ends a Read.
	f := os.NewFile(uintptr(fd), "inotify")
	ch := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				l := int(binary.NativeEndian.Uint32(buf[off+12:]))
				name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+l]), "\x00")
				if strings.HasPrefix(name, prefix) {
					close(ch)
					return
				}
				off += syscall.SizeofInotifyEvent + l
			}
		}
	}()
	return ch, func() { f.Close() }
}

// checkNotAgain checks the run after the kills, which moved the pack blobs in moved: none
// of them had an earlier run moved whole, and it moved some where some were left.
func checkNotAgain(t *testing.T, total int, done, moved map[string]bool, what, out string) {
	t.Helper()
	again := 0
	for d := range moved {
		if done[d] {
			again++
		}
	}
	t.Logf("%s: %d of %d pack blobs done by the killed runs; the last run moved %d", what, len(done), total, len(moved))
	if again > 0 || (len(moved) == 0) != (len(done) == total) || len(moved) > total-len(done) {
		t.Errorf("%s: the last run moved %d pack blobs, %d of them done before:\n%s", what, len(moved), again, out)
	}
}

// packBlobs are the pack blobs a push of the seed in dir sends (its index's PackRanges),
// by digest, with their sizes.
func packBlobs(t *testing.T, dir string, m *seed.Manifest) map[string]int64 {
	t.Helper()
	x, err := seed.ReadIndex(dir, m.Disks[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, m.Disks[0].File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	for _, r := range x.PackRanges() {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, r.Offset, r.Size)); err != nil {
			t.Fatal(err)
		}
		d := "sha256:" + hex.EncodeToString(h.Sum(nil))
		if r.Digest != "" && string(r.Digest) != d {
			t.Errorf("the index records %s for the pack blob at %d, its bytes are %s", r.Digest, r.Offset, d)
		}
		out[d] = r.Size
	}
	return out
}

func fileSizeOf(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
