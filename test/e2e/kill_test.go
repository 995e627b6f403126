package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
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

// killAt runs the CLI and kills it (SIGKILL: no cleanup runs) once reached says its
// progress has come far enough; it reports whether it did kill (the command may finish
// first). Progress is polled, not timed: the kill point is a count of chunks.
func killAt(t *testing.T, env []string, reached func() bool, args ...string) bool {
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
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out.String())
			}
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if reached() {
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			return true
		}
	}
}

// TestSeedTransfersSurviveKills kills seed push, pull and write at five points each on a
// multi-GiB seed, pushed as pack blobs of at most ociseed.MaxPackBlob. The kill points are
// counted in pack blobs the registry holds or has served whole, across the runs: kill i
// lands once i/7 of them are done, so each lands mid-transfer and each run has to carry on
// from the one before. Each run sends or fetches only the pack blobs that had not
// finished, and the result is the seed byte for byte; a write killed while writing leaves
// no partial file once it is run again.
func TestSeedTransfersSurviveKills(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	reg := registry.StartT(t, registry.Options{})
	src, m := multiGiBSeed(t)
	packs := packBlobs(t, src, m)
	total := len(packs)
	t.Logf("seed: %d pack blobs, %d MiB stored", total, m.Disks[0].Size>>20)
	tmp := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp)
	ref := reg.Ref("seeds/big:1")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(snofactoryBin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	uploads := func() int {
		n := 0
		for _, q := range reg.Requests() {
			if q.Method == "PUT" && q.Kind() == "upload" && q.Status == 201 {
				n++
			}
		}
		return n
	}
	stored := func() int {
		n := 0
		for d := range packs {
			hex := strings.TrimPrefix(d, "sha256:")
			if fileSizeOf(filepath.Join(reg.StorageDir(), "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")) > 0 {
				n++
			}
		}
		return n
	}
	// The few small blobs beside the packs: the index, seed.json, the empty config.
	const small = 3

	// push: each run uploads only packs the registry lacks, so every upload it made but
	// those few is a pack it stored.
	kills := 0
	for i := 1; i <= 5; i++ {
		reg.Reset()
		before := stored()
		if killAt(t, env, func() bool { return stored() >= i*total/7 && stored() > before }, "seed", "push", src, ref) {
			kills++
		}
		if got, added := uploads(), stored()-before; got > added+small {
			t.Errorf("push run %d: %d uploads, %d packs newly stored: it sent packs the registry held", i, got, added)
		}
	}
	held := stored()
	reg.Reset()
	run("seed", "push", src, ref)
	t.Logf("push: %d kills, then %d uploads with %d of %d pack blobs stored", kills, uploads(), held, total)
	if got := uploads(); kills < 5 || got > total-held+small || got == 0 || held < 5*total/7 {
		t.Errorf("push: %d kills; the last run uploaded %d blobs with %d of %d pack blobs already stored", kills, got, held, total)
	}

	// pull
	dst := filepath.Join(t.TempDir(), "pulled")
	done, kills := killTransfer(t, reg, env, packs, 5, "seed", "pull", ref, dst)
	reg.Reset()
	out := run("seed", "pull", ref, dst)
	checkResumed(t, reg, packs, done, kills, 5, 5, "pull", out)
	for _, f := range []string{"seed.json", "disk.pack", "disk.index"} {
		_, a, _ := seed.FileDigest(context.Background(), filepath.Join(src, f))
		_, b, _ := seed.FileDigest(context.Background(), filepath.Join(dst, f))
		if a != b || a == "" {
			t.Errorf("pulled %s differs", f)
		}
	}

	// write: four kills while it pulls, one while it writes the disk
	disk := filepath.Join(t.TempDir(), "disk.img")
	writing := func() bool {
		p, _ := filepath.Glob(filepath.Join(filepath.Dir(disk), ".disk.img.partial-*"))
		return len(p) > 0 && fileSizeOf(p[0]) > 0
	}
	done, kills = killTransfer(t, reg, env, packs, 4, "seed", "write", "--image", ref, "--device", disk)
	reg.Reset()
	if killAt(t, env, writing, "seed", "write", "--image", ref, "--device", disk) {
		kills++
	}
	for d := range packGets(reg, packs, done) {
		done[d] = true
	}
	reg.Reset()
	out = run("seed", "write", "--image", ref, "--device", disk)
	checkResumed(t, reg, packs, done, kills, 5, 4, "write", out)
	if out := run("seed", "verify", src, "--device", disk); !strings.Contains(out, "complete") {
		t.Errorf("verify --device: %s", out)
	}
	if p, _ := filepath.Glob(filepath.Join(filepath.Dir(disk), ".*partial*")); len(p) > 0 {
		t.Errorf("partial files left: %v", p)
	}
	if p, _ := filepath.Glob(filepath.Join(tmp, "snofactory-*")); len(p) > 0 {
		t.Errorf("staging left in TMPDIR: %v", p)
	}
}

// killTransfer kills a pull (args) n times, the i-th once i/7 of the pack blobs have been
// served whole across the runs, and returns those served whole and the kills.
func killTransfer(t *testing.T, reg *registry.Registry, env []string, packs map[string]int64, n int, args ...string) (map[string]bool, int) {
	t.Helper()
	done := map[string]bool{}
	kills := 0
	for i := 1; i <= n; i++ {
		reg.Reset()
		before := len(done)
		reached := func() bool {
			got := packGets(reg, packs, done)
			return len(got) > 0 && before+len(got) >= i*len(packs)/7
		}
		if killAt(t, env, reached, args...) {
			kills++
		}
		for d := range packGets(reg, packs, done) {
			done[d] = true
		}
	}
	return done, kills
}

// checkResumed checks the run after the kills (wantKills of them, which had the registry
// serve whole at least n/7 of the pack blobs): it may fetch only the pack blobs never
// served whole, and those the last killed run had in flight (the registry may have sent
// all of one the client had not yet written): at most DefaultJobs more.
func checkResumed(t *testing.T, reg *registry.Registry, packs map[string]int64, done map[string]bool, kills, wantKills, n int, what, out string) {
	t.Helper()
	fetched := map[string]bool{}
	for _, q := range reg.Requests() {
		d := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if _, ok := packs[d]; ok && q.Method == "GET" && q.Status >= 200 && q.Status < 300 {
			fetched[d] = true
		}
	}
	total := len(packs)
	t.Logf("%s: %d kills with %d of %d pack blobs served whole, then %d fetched", what, kills, len(done), total, len(fetched))
	if kills < wantKills || len(done) < n*total/7 || len(fetched) > total-len(done)+ociseed.DefaultJobs {
		t.Errorf("%s: %d kills with %d of %d pack blobs served whole; the last run fetched from %d: %s", what, kills, len(done), total, len(fetched), out)
	}
}

// packGets are the pack blobs among packs the registry has served whole since its last
// Reset, but those in skip.
func packGets(reg *registry.Registry, packs map[string]int64, skip map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, q := range reg.Requests() {
		d := q.Path[strings.LastIndex(q.Path, "/")+1:]
		if size, ok := packs[d]; ok && q.Method == "GET" && q.Status == 200 && q.Bytes == size && !skip[d] {
			out[d] = true
		}
	}
	return out
}

// packBlobs are the pack blobs a push of the seed in dir sends (ociseed.PackRanges), by
// digest, with their sizes.
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
	for _, r := range ociseed.PackRanges(x.Groups()) {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, r.Offset, r.Size)); err != nil {
			t.Fatal(err)
		}
		out["sha256:"+hex.EncodeToString(h.Sum(nil))] = r.Size
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
