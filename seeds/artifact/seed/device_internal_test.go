package seed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

// failAfter reads from r and fails once n bytes were read.
type failAfter struct {
	r io.Reader
	n int
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("the medium went away")
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

// checkBlockWrite runs write onto a stand-in device of size bytes of old content and
// checks the outcome: with partial empty, the device holds raw followed by its old tail
// (never truncated); else write failed with a *PartialError containing partial, and the
// first MiB is cleared. It returns write's error.
func checkBlockWrite(t *testing.T, raw []byte, size int, partial string, write func(dev string) error) error {
	t.Helper()
	dev := filepath.Join(t.TempDir(), "dev")
	old := bytes.Repeat([]byte{0x5a}, size)
	os.WriteFile(dev, old, 0o644)
	err := write(dev)
	got, _ := os.ReadFile(dev)
	if len(got) != len(old) {
		t.Fatalf("the device is %d bytes, was %d: a device is never truncated", len(got), len(old))
	}
	if partial == "" {
		if err != nil || !bytes.Equal(got[:len(raw)], raw) || !bytes.Equal(got[len(raw):], old[len(raw):]) {
			t.Fatalf("err %v; the device does not hold the disk followed by its old tail", err)
		}
		return nil
	}
	var pe *PartialError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), partial) {
		t.Fatalf("err = %v, want a partial-data error with %q", err, partial)
	}
	if !bytes.Equal(got[:headLen], make([]byte, headLen)) {
		t.Error("the first MiB was not cleared after a failed write")
	}
	return err
}

// A block device is written in place, its first MiB last: a completed write holds the
// disk (and what lay beyond it is untouched, nothing is truncated); a write that stops
// part-way, or whose digest does not match, clears the first MiB and says the device
// holds partial data. (A regular file stands in for the device: the writes are the same.)
func TestWriteBlockHeadLast(t *testing.T) {
	raw := bytes.Repeat([]byte("seed-disk-"), 400_000)[:3<<20]
	d := Disk{File: "disk.raw.zst", VirtualSize: int64(len(raw)), RawDigest: digest.FromBytes(raw)}
	for _, tc := range []struct {
		name    string
		reader  func() io.Reader
		disk    Disk
		partial string
	}{
		{"complete", func() io.Reader { return bytes.NewReader(raw) }, d, ""},
		{"the source fails mid-way", func() io.Reader { return &failAfter{r: bytes.NewReader(raw), n: 2 << 20} }, d, "the medium went away"},
		{"the digest does not match", func() io.Reader { return bytes.NewReader(raw) },
			Disk{File: d.File, VirtualSize: d.VirtualSize, RawDigest: digest.FromString("other")}, "raw digest mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBlockWrite(t, raw, 4<<20, tc.partial, func(dev string) error {
				return writeBlock(context.Background(), dev, tc.disk, tc.reader())
			})
			if tc.partial != "" && !strings.Contains(err.Error(), "now holds partial data") {
				t.Errorf("err = %v, want it to say the device holds partial data", err)
			}
		})
	}
}

// packedDisk packs a 4 MiB raw disk with a hole in the middle (1.5 to 3 MiB) and returns
// its bytes, index and pack path.
func packedDisk(t *testing.T) ([]byte, *diskpack.Index, string) {
	t.Helper()
	dir := t.TempDir()
	raw := make([]byte, 4<<20)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range raw {
		if i < 3<<19 || i >= 3<<20 {
			raw[i] = byte(r.Uint32())
		}
	}
	path := filepath.Join(dir, "disk.raw")
	f, _ := os.Create(path)
	f.Truncate(int64(len(raw)))
	f.WriteAt(raw[:3<<19], 0)
	f.WriteAt(raw[3<<20:], 3<<20)
	f.Close()
	p := diskpack.Params{Min: 16 << 10, Avg: 64 << 10, Max: 256 << 10}
	if _, err := diskpack.PackFiles(context.Background(), path, filepath.Join(dir, "disk.pack"), filepath.Join(dir, "disk.index"), p); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "disk.index"))
	x, err := diskpack.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Gaps()) == 0 {
		t.Fatal("the test disk has no unstored range")
	}
	return raw, x, filepath.Join(dir, "disk.pack")
}

// A chunked disk goes onto a block device chunk by chunk, the ranges it does not store
// zeroed over the device's old content, the first MiB last; a chunk that does not match
// its digest stops the write, and the first MiB is cleared. (A regular file stands in for
// the device; the loop-device test writes a real one.)
func TestWriteChunkedBlockHeadLast(t *testing.T) {
	raw, x, pack := packedDisk(t)
	d := Disk{File: "disk.pack", VirtualSize: int64(len(raw))}
	for _, tc := range []struct {
		name    string
		damage  bool
		partial string
	}{
		{"complete", false, ""},
		{"a damaged chunk", true, "at disk offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := os.ReadFile(pack)
			if tc.damage {
				p[len(p)/2] ^= 0xff // the pack is chunks end to end: this is inside one
			}
			f := filepath.Join(t.TempDir(), "pack")
			os.WriteFile(f, p, 0o600)
			pf, _ := os.Open(f)
			defer pf.Close()
			r, err := diskpack.NewReader(pf, x, "disk.pack")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = checkBlockWrite(t, raw, 6<<20, tc.partial, func(dev string) error {
				return writeChunkedBlock(context.Background(), dev, d, x, r)
			})
			var ce *diskpack.ChunkError
			if tc.partial != "" && !errors.As(err, &ce) {
				t.Errorf("err = %v, want it to name the chunk", err)
			}
		})
	}
}

// heldHead keeps writes to the head and passes on the rest, a write straddling the edge
// split between them.
func TestHeldHead(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "dev")
	os.WriteFile(dev, make([]byte, 16), 0o644)
	f, _ := os.OpenFile(dev, os.O_WRONLY, 0)
	h := &heldHead{w: f, head: make([]byte, 4)}
	for _, w := range []struct {
		p   string
		off int64
	}{{"ab", 0}, {"cdef", 2}, {"zz", 10}} {
		if n, err := h.WriteAt([]byte(w.p), w.off); err != nil || n != len(w.p) {
			t.Fatalf("WriteAt(%q, %d) = %d, %v", w.p, w.off, n, err)
		}
	}
	f.Close()
	got, _ := os.ReadFile(dev)
	if string(h.head) != "abcd" || string(got[4:6]) != "ef" || string(got[10:12]) != "zz" || !bytes.Equal(got[:4], make([]byte, 4)) {
		t.Errorf("head %q, device %q", h.head, got)
	}
}

// A chunked disk goes into a file the same bytes as the disk, its unstored range a hole;
// a chunk that does not match its digest stops the write, names the chunk, and leaves
// neither the file nor its partial copy.
func TestWriteChunkedFile(t *testing.T) {
	raw, x, pack := packedDisk(t)
	d := Disk{File: "disk.pack", VirtualSize: int64(len(raw))}
	for _, damage := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged %v", damage), func(t *testing.T) {
			p, _ := os.ReadFile(pack)
			if damage {
				p[len(p)/2] ^= 0xff
			}
			r, err := diskpack.NewReader(bytes.NewReader(p), x, "disk.pack")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			dir := t.TempDir()
			out := filepath.Join(dir, "disk.raw")
			err = writeChunkedFile(context.Background(), out, d, x, r)
			if damage {
				var ce *diskpack.ChunkError
				left, _ := os.ReadDir(dir)
				if !errors.As(err, &ce) || !errors.Is(err, ErrBadSeed) || len(left) != 0 {
					t.Fatalf("err = %v, left %v; want a bad chunk named and nothing left", err, left)
				}
				return
			}
			got, _ := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("err = %v; the file does not hold the disk", err)
			}
			f, _ := os.Open(out)
			defer f.Close()
			if hole, err := unix.Seek(int(f.Fd()), 3<<19, unix.SEEK_HOLE); err != nil || hole >= 3<<20-4096 {
				t.Errorf("SEEK_HOLE from %d = %d, %v: the unstored range was written", 3<<19, hole, err)
			}
		})
	}
}
