package diskpack

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/ncw/directio"

	"github.com/snofactory/snofactory/pipeline/output"
)

// directBlock is the block of a direct write: every write WriteAtDirect issues is whole
// blocks of it, at an offset that is a multiple of it, from memory aligned to it.
const directBlock = output.DirectBlock

// DirectWritable tells whether WriteAtDirect can write the disk: its size is whole blocks.
func (x *Index) DirectWritable() bool { return x.Size%directBlock == 0 }

// WriteAtDirect is WriteAt for a target opened with O_DIRECT, which takes only aligned
// whole blocks and in return skips the page cache: the kernel's copy of every byte into it
// was a third of a 16 GiB write's CPU. A chunk's whole blocks are written from where it
// was decoded (chunkBuffers.direct); a block it shares with its neighbours or with a
// range no chunk covers is gathered and written, zeros and all, once every chunk in it is
// there. The disk must be DirectWritable.
func (r *Reader) WriteAtDirect(ctx context.Context, w io.WriterAt) error {
	if !r.x.DirectWritable() {
		return fmt.Errorf("a disk of %d bytes is not whole %d-byte blocks", r.x.Size, directBlock)
	}
	e := &edgeBlocks{w: w, chunks: r.x.Chunks, open: map[int64]*edgeBlock{}}
	// One write at a time, as WriteAt; the edge blocks are shared too.
	var one sync.Mutex
	err := r.eachChunk(ctx, r.x.Chunks, true, func(c Chunk, raw []byte) error {
		one.Lock()
		defer one.Unlock()
		if err := e.write(c.Offset, raw); err != nil {
			return fmt.Errorf("writing the chunk at %d: %w", c.Offset, err)
		}
		return nil
	})
	if err == nil && len(e.open) > 0 {
		err = fmt.Errorf("%d blocks shared by chunks were never completed", len(e.open))
	}
	return err
}

// edgeBlocks gathers the blocks that chunks share with each other or with a zero range.
type edgeBlocks struct {
	w      io.WriterAt
	chunks []Chunk // the index's, in disk order
	open   map[int64]*edgeBlock
}

type edgeBlock struct {
	buf  []byte // aligned; zeros where no chunk is
	left int64  // bytes of chunks not yet in buf
}

// write writes raw, the chunk at off decoded in place (chunkBuffers.direct): its whole
// blocks at once, its first and last block once they are complete.
func (e *edgeBlocks) write(off int64, raw []byte) error {
	end := off + int64(len(raw))
	from, to := alignUp(off), alignDown(end)
	if to > from {
		if _, err := e.w.WriteAt(raw[from-off:to-off], from); err != nil {
			return err
		}
	}
	last := alignDown(end - 1)
	for k := alignDown(off); ; k = last {
		if k < off || k+directBlock > end { // not one of the whole blocks written above
			lo, hi := max(off, k), min(end, k+directBlock)
			if err := e.add(k, raw[lo-off:hi-off], lo-k); err != nil {
				return err
			}
		}
		if k == last {
			return nil
		}
	}
}

// add copies p into block k at at, and writes the block once every chunk in it is there.
func (e *edgeBlocks) add(k int64, p []byte, at int64) error {
	b := e.open[k]
	if b == nil {
		b = &edgeBlock{buf: directio.AlignedBlock(directBlock), left: e.covered(k)}
		e.open[k] = b
	}
	copy(b.buf[at:], p)
	b.left -= int64(len(p))
	if b.left > 0 {
		return nil
	}
	delete(e.open, k)
	_, err := e.w.WriteAt(b.buf, k)
	return err
}

// covered is how many bytes of block k the chunks cover.
func (e *edgeBlocks) covered(k int64) int64 {
	i := sort.Search(len(e.chunks), func(i int) bool { return e.chunks[i].Offset+e.chunks[i].Size > k })
	var n int64
	for ; i < len(e.chunks) && e.chunks[i].Offset < k+directBlock; i++ {
		c := e.chunks[i]
		n += min(c.Offset+c.Size, k+directBlock) - max(c.Offset, k)
	}
	return n
}

func alignDown(v int64) int64 { return v &^ (directBlock - 1) }
func alignUp(v int64) int64   { return alignDown(v + directBlock - 1) }
