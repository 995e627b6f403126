package diskpack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/ncw/directio"
)

// block is the granularity at which tests look for holes: a file system block.
const block = 4 << 10

// memDisk is a disk in memory that records the blocks written through it.
type memDisk struct {
	mu      sync.Mutex
	b       []byte
	blocks  map[int64]bool // blocks written
	fail    error
	onWrite func()
	// direct refuses a write that is not whole aligned blocks, as O_DIRECT does (the
	// kernel's check of the memory's alignment is TestWriteAtDirectFile's).
	direct bool
}

func (d *memDisk) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return 0, d.fail
	}
	if d.direct && (off%directBlock != 0 || len(p)%directBlock != 0 || len(p) == 0) {
		return 0, fmt.Errorf("a direct write of %d bytes at %d", len(p), off)
	}
	if d.onWrite != nil {
		d.onWrite()
	}
	if off+int64(len(p)) > int64(len(d.b)) {
		return 0, fmt.Errorf("write of %d bytes at %d past the disk's end %d", len(p), off, len(d.b))
	}
	for blk := alignDown(off); blk < off+int64(len(p)); blk += block {
		d.blocks[blk] = true
	}
	return copy(d.b[off:], p), nil
}

// placed returns x's chunks moved to the offsets at gives (the previous chunk's end in,
// the next chunk's offset out), the disk's size end(last chunk's end), and the raw disk
// they make.
func placed(t *testing.T, r *Reader, x *Index, at func(prevEnd int64) int64, end func(int64) int64) (*Index, []byte) {
	t.Helper()
	y := *x
	y.Chunks = nil
	var prev int64
	for _, c := range x.Chunks {
		c.Offset = at(prev)
		prev = c.Offset + c.Size
		y.Chunks = append(y.Chunks, c)
	}
	y.Size = end(prev)
	raw := make([]byte, y.Size)
	for i, c := range y.Chunks {
		b, err := r.Chunk(x.Chunks[i])
		if err != nil {
			t.Fatal(err)
		}
		copy(raw[c.Offset:], b)
	}
	return &y, raw
}

// WriteAt writes the same bytes as the disk holds, wherever its chunks lie, never touching a
// block no chunk covers: holes stay holes. So does WriteAtDirect, on a disk of whole
// blocks, in nothing but whole aligned blocks from aligned memory.
func TestWriteAtSameBytes(t *testing.T) {
	x, p := packedBig(t)
	src, err := NewReader(bytes.NewReader(p), x, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	same := func(v int64) int64 { return v }
	for _, tc := range []struct {
		name string
		at   func(prevEnd int64) int64
		end  func(lastEnd int64) int64
	}{
		{"end to end from 0", same, same},
		{"unaligned, gaps inside a block", func(e int64) int64 { return e + 777 }, func(e int64) int64 { return e + 3 }},
		{"holes between chunks", func(e int64) int64 { return alignUp(e) + 64<<10 + 5 }, func(e int64) int64 { return e + 1<<20 }},
		{"last partial chunk ends the disk", func(e int64) int64 { return e + 100 }, same},
		{"unaligned chunks, a disk of whole blocks", func(e int64) int64 { return e + 777 }, alignUp},
		{"unaligned chunks and holes, a disk of whole blocks", func(e int64) int64 { return alignUp(e) + 64<<10 + 5 }, func(e int64) int64 { return alignUp(e) + 1<<20 }},
		{"aligned chunks, the last ending the disk", func(e int64) int64 { return alignUp(e) + block }, alignUp},
	} {
		y, raw := placed(t, src, x, tc.at, tc.end)
		t.Run(tc.name, func(t *testing.T) { writeSameBytes(t, p, y, raw, false) })
		if y.DirectWritable() {
			t.Run(tc.name+", direct", func(t *testing.T) { writeSameBytes(t, p, y, raw, true) })
		} else if err := writeDirect(p, y); err == nil || !strings.Contains(err.Error(), "not whole") {
			t.Errorf("%s: WriteAtDirect of a disk of %d bytes, not whole blocks: %v", tc.name, y.Size, err)
		}
	}
}

// WriteAtDirect writes a file opened with O_DIRECT, whose every write the kernel refuses
// unless its offset, length and memory are aligned, byte for byte.
func TestWriteAtDirectFile(t *testing.T) {
	x, p := packedBig(t)
	src, err := NewReader(bytes.NewReader(p), x, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	y, raw := placed(t, src, x, func(e int64) int64 { return e + 777 }, alignUp)
	r, err := NewReader(bytes.NewReader(p), y, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := filepath.Join(t.TempDir(), "disk.raw")
	f, err := directio.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("the file system of %s takes no O_DIRECT: %v", path, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(y.Size); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteAtDirect(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("the file written differs from the raw disk (%v)", err)
	}
}

// writeDirect writes the disk of index y and pack p to memory with WriteAtDirect.
func writeDirect(p []byte, y *Index) error {
	r, err := NewReader(bytes.NewReader(p), y, "pack")
	if err != nil {
		return err
	}
	defer r.Close()
	return r.WriteAtDirect(context.Background(), &memDisk{b: make([]byte, y.Size), blocks: map[int64]bool{}, direct: true})
}

// writeSameBytes writes the disk of index y and pack p to memory, with WriteAtDirect or
// WriteAt, and checks it is raw and only blocks with chunk bytes were written.
func writeSameBytes(t *testing.T, p []byte, y *Index, raw []byte, direct bool) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(p), y, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	disk := make([]byte, y.Size)
	w := &memDisk{b: disk, blocks: map[int64]bool{}, direct: direct}
	write := r.WriteAt
	if direct {
		write = r.WriteAtDirect
	}
	if err := write(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, raw) {
		t.Fatal("the written disk differs from the raw disk")
	}
	touched := map[int64]bool{}
	for _, c := range y.Chunks {
		for blk := alignDown(c.Offset); blk < c.Offset+c.Size; blk += block {
			touched[blk] = true
		}
	}
	for blk := range w.blocks {
		if !touched[blk] {
			t.Errorf("block at %d was written, no chunk covers it: a hole was filled", blk)
		}
	}
}

// A damaged chunk stops the write with an error naming it; a failing writer's error comes
// back; either way WriteAt returns only after its decoders have.
func TestWriteAtStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage bool
		fail   error
		want   string
	}{
		{"damaged chunk", true, nil, "at disk offset"},
		{"writer fails", false, errors.New("disk full"), "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := whileReadsHeld(t, 5, "WriteAt", func(_ *testing.T, r *Reader) <-chan error {
				if tc.damage {
					r.r = damagedAt{r.r, r.offsets[r.x.Chunks[len(r.x.Chunks)/2].Blob]}
				}
				disk := &memDisk{b: make([]byte, r.x.Size), blocks: map[int64]bool{}, fail: tc.fail}
				returned := make(chan error, 1)
				go func() { returned <- r.WriteAt(context.Background(), disk) }()
				return returned
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteAt = %v, want an error with %q", err, tc.want)
			}
			var ce *ChunkError
			if tc.damage && !errors.As(err, &ce) {
				t.Errorf("WriteAt = %v, want a *ChunkError", err)
			}
		})
	}
}

// packedBig packs a disk of 10 MiB of data, about 160 chunks.
func packedBig(t *testing.T) (*Index, []byte) {
	const data = 10 << 20
	f := sparseFile(t, data, map[int64][]byte{0: content(data, 7)})
	return pack(t, f, data, small)
}

// Cancelling (Ctrl-C) stops the write part-way, with the context's error.
func TestWriteAtCancelled(t *testing.T) {
	x, p := packedBig(t)
	r, err := NewReader(bytes.NewReader(p), x, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disk := &memDisk{b: make([]byte, x.Size), blocks: map[int64]bool{}, onWrite: cancel}
	if err := r.WriteAt(ctx, disk); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteAt = %v, want it cancelled", err)
	}
	if int64(len(disk.blocks))*block >= x.DataBytes() {
		t.Errorf("all %d blocks were written after the cancel", len(disk.blocks))
	}
}

// damagedAt flips the first byte read at off.
type damagedAt struct {
	r   io.ReaderAt
	off int64
}

func (d damagedAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.r.ReadAt(p, off)
	if off == d.off && n > 0 {
		p[0] ^= 0xff
	}
	return n, err
}

// barrierPack holds every read until n reads are in flight at once: a reader that decodes
// one chunk at a time never gets there, and the bubble deadlocks.
type barrierPack struct {
	r      io.ReaderAt
	n      int32
	in     atomic.Int32
	all    chan struct{}
	closed sync.Once
}

func (b *barrierPack) ReadAt(p []byte, off int64) (int, error) {
	if b.in.Add(1) >= b.n {
		b.closed.Do(func() { close(b.all) })
	}
	<-b.all
	return b.r.ReadAt(p, off)
}

// WriteAt decodes jobs chunks at once: the reads of that many chunks are in flight
// together before any of them returns.
func TestWriteAtDecodesConcurrently(t *testing.T) {
	const size = 4 << 20
	f := sparseFile(t, size, map[int64][]byte{0: content(size, 9)})
	x, p := pack(t, f, size, small)
	synctest.Test(t, func(t *testing.T) {
		const jobs = 3
		b := &barrierPack{r: bytes.NewReader(p), n: jobs, all: make(chan struct{})}
		r, err := NewReader(b, x, "pack")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.jobs = jobs
		disk := &memDisk{b: make([]byte, size), blocks: map[int64]bool{}}
		if err := r.WriteAt(context.Background(), disk); err != nil {
			t.Fatal(err)
		}
		if got := b.in.Load(); got != int32(len(x.Chunks)) {
			t.Errorf("%d chunk reads, the disk has %d chunks", got, len(x.Chunks))
		}
	})
}
