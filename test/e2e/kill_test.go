package e2e

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
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
// multi-GiB seed, its chunks in groups. Each re-run sends or fetches only the chunks that had not finished, and
// the result is the seed byte for byte; a write killed while writing leaves no partial
// file once it is run again.
func TestSeedTransfersSurviveKills(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	reg := registry.StartT(t, registry.Options{})
	src, m := multiGiBSeed(t)
	x, err := seed.ReadIndex(src, m.Disks[0])
	if err != nil {
		t.Fatal(err)
	}
	// The registry holds a blob per chunk group (a chunk each on a small disk): pushes
	// upload and pulls fetch that many.
	chunks, _ := x.Blobs()
	distinct := map[string]bool{}
	for _, g := range x.Groups() {
		distinct[g.Digest.String()] = true
	}
	total := len(distinct)
	t.Logf("seed: %d chunks in %d blobs, %d MiB stored", len(chunks), total, m.Disks[0].Size>>20)
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

	// push
	kills := 0
	for range 5 {
		reg.Reset()
		if killAt(t, env, func() bool { return uploads() >= total/7 }, "seed", "push", src, ref) {
			kills++
		}
	}
	stored := len(registryBlobs(t, reg.StorageDir()))
	reg.Reset()
	run("seed", "push", src, ref)
	t.Logf("push: %d kills, then %d uploads with %d of %d blobs stored", kills, uploads(), stored, total)
	if got := uploads(); kills < 5 || got > total-stored+3 || got == 0 {
		t.Errorf("push: %d kills; the last run uploaded %d blobs with %d of %d already stored", kills, got, stored, total)
	}

	// pull
	dst := filepath.Join(t.TempDir(), "pulled")
	kills = 0
	for range 5 {
		reg.Reset()
		if killAt(t, env, func() bool { return reg.Stats().BlobGets >= total/6 }, "seed", "pull", ref, dst) {
			kills++
		}
	}
	reg.Reset()
	out := run("seed", "pull", ref, dst)
	t.Logf("pull: %d kills, then %d blobs fetched of %d", kills, reg.Stats().BlobGets, total)
	if got := reg.Stats().BlobGets; kills < 5 || got > total/3 {
		t.Errorf("pull: %d kills; the last run fetched %d of %d blobs: %s", kills, got, total, out)
	}
	for _, f := range []string{"seed.json", "disk.pack", "disk.index"} {
		_, a, _ := seed.FileDigest(context.Background(), filepath.Join(src, f))
		_, b, _ := seed.FileDigest(context.Background(), filepath.Join(dst, f))
		if a != b || a == "" {
			t.Errorf("pulled %s differs", f)
		}
	}

	// write: four kills while it pulls, one while it writes the disk
	disk := filepath.Join(t.TempDir(), "disk.img")
	kills = 0
	for range 4 {
		reg.Reset()
		if killAt(t, env, func() bool { return reg.Stats().BlobGets >= total/6 }, "seed", "write", "--image", ref, "--device", disk) {
			kills++
		}
	}
	writing := func() bool {
		p, _ := filepath.Glob(filepath.Join(filepath.Dir(disk), ".disk.img.partial-*"))
		return len(p) > 0 && fileSizeOf(p[0]) > 0
	}
	if killAt(t, env, writing, "seed", "write", "--image", ref, "--device", disk) {
		kills++
	}
	reg.Reset()
	out = run("seed", "write", "--image", ref, "--device", disk)
	t.Logf("write: %d kills, then %d blobs fetched of %d", kills, reg.Stats().BlobGets, total)
	if got := reg.Stats().BlobGets; kills < 5 || got > total/3 {
		t.Errorf("write: %d kills; the last run fetched %d of %d blobs: %s", kills, got, total, out)
	}
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

func fileSizeOf(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
