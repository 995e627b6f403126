package diskpack

import (
	"context"
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sync/errgroup"
)

// Alignment is the alignment of every write WriteAligned hands its aligned writer: offset,
// length and memory. 4 KiB suits disks with 512-byte and 4 KiB logical blocks, and the
// page size, so the writer may bypass the page cache (O_DIRECT).
const Alignment = 4 << 10

// stageSize is the size of each of WriteAligned's two staging buffers: one fills while the
// other is written.
const stageSize = 8 << 20

// WriteAligned writes the disk in disk order through two staging buffers, each write to
// aligned a run of whole Alignment blocks from memory aligned alike, so that aligned may
// write past the page cache: on this kind of machine, copying a gigabyte into the page
// cache costs seconds of kernel time, more than decompressing it. Chunks are
// decompressed and checked on every core ahead of the writes (inOrder), so that
// decompression, checking and writing overlap; memory stays at a few chunks per core and
// the two buffers.
//
// Blocks no chunk touches are not written: the target must read as zeros there already
// (a fresh sparse file of the disk's size, or zeroed ahead), and a file's holes stay
// holes. The last block of a run is padded with zeros. Only the disk's last bytes, when
// its size is not a multiple of Alignment, go through tail instead, unaligned. A chunk
// that fails its check stops the write with its *ChunkError; what was written stays.
func (r *Reader) WriteAligned(ctx context.Context, aligned, tail io.WriterAt) error {
	s := &stager{size: r.x.Size, full: make(chan stage, 1), free: make(chan []byte, 2), tail: tail}
	for range 2 {
		s.free <- alignedBuffer(stageSize)
	}
	g, gctx := errgroup.WithContext(ctx)
	s.ctx = gctx
	g.Go(func() error {
		defer close(s.full)
		err := r.inOrder(gctx, s.add)
		if err == nil {
			err = s.flush()
		}
		return err
	})
	g.Go(func() error {
		for st := range s.full {
			if err := st.write(aligned, tail); err != nil {
				return err
			}
			s.free <- st.buf
		}
		return nil
	})
	return g.Wait()
}

// stage is a filled staging buffer: buf[:n] belongs at disk offset off.
type stage struct {
	buf []byte
	off int64
	n   int
	end int64 // the disk's size
}

// write writes the stage's bytes, its last block padded with zeros, through aligned; a last
// block that would reach past the disk's end goes unpadded through tail.
func (st stage) write(aligned, tail io.WriterAt) error {
	whole := alignUp(int64(st.n))
	if st.off+whole > st.end {
		whole = alignDown(int64(st.n))
	}
	if whole > int64(st.n) {
		clear(st.buf[st.n:whole])
	}
	if whole > 0 {
		if _, err := aligned.WriteAt(st.buf[:whole], st.off); err != nil {
			return fmt.Errorf("writing %d bytes at disk offset %d: %w", whole, st.off, err)
		}
	}
	if rest := st.buf[min(whole, int64(st.n)):st.n]; len(rest) > 0 {
		if _, err := tail.WriteAt(rest, st.off+whole); err != nil {
			return fmt.Errorf("writing the last %d bytes at disk offset %d: %w", len(rest), st.off+whole, err)
		}
	}
	return nil
}

// stager gathers chunks, in disk order, into runs of blocks in a staging buffer.
type stager struct {
	ctx   context.Context
	size  int64
	buf   []byte // the buffer filling, nil between runs
	off   int64  // disk offset of buf[0], aligned
	n     int    // bytes of buf filled
	full  chan stage
	free  chan []byte
	tail  io.WriterAt
	zeros [Alignment]byte
}

// add puts chunk c's raw bytes at their place: after the run in the buffer when c starts
// in or next to its last block (the bytes between are zeros on the disk), else in a new
// run.
func (s *stager) add(c Chunk, raw []byte) error {
	if s.buf != nil && alignDown(c.Offset) > s.off+alignUp(int64(s.n)) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if s.buf == nil {
		if err := s.next(alignDown(c.Offset)); err != nil {
			return err
		}
	}
	for gap := c.Offset - (s.off + int64(s.n)); gap > 0; {
		k := min(gap, Alignment)
		if err := s.put(s.zeros[:k]); err != nil {
			return err
		}
		gap -= k
	}
	return s.put(raw)
}

// put appends p to the run, handing on each buffer it fills.
func (s *stager) put(p []byte) error {
	for len(p) > 0 {
		k := copy(s.buf[s.n:], p)
		s.n += k
		p = p[k:]
		if s.n == len(s.buf) {
			next := s.off + int64(s.n)
			if err := s.flush(); err != nil {
				return err
			}
			if err := s.next(next); err != nil {
				return err
			}
		}
	}
	return nil
}

// next starts a run at disk offset off (aligned) in a free buffer.
func (s *stager) next(off int64) error {
	select {
	case s.buf = <-s.free:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	s.off, s.n = off, 0
	return nil
}

// flush hands the filling buffer on to be written.
func (s *stager) flush() error {
	if s.buf == nil {
		return nil
	}
	st := stage{buf: s.buf, off: s.off, n: s.n, end: s.size}
	s.buf = nil
	select {
	case s.full <- st:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func alignDown(v int64) int64 { return v &^ (Alignment - 1) }
func alignUp(v int64) int64   { return alignDown(v + Alignment - 1) }

// alignedBuffer returns n bytes starting at an Alignment boundary in memory.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+Alignment)
	// Go's heap does not move objects, so the address stays aligned.
	skip := (Alignment - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%Alignment)) % Alignment
	return b[skip : skip+n : skip+n]
}
