package diskpack

import (
	"context"
	"fmt"
	"math/bits"
	"os"

	"github.com/folbricht/desync"
)

// chunkerWindow is the bytes desync's rolling hash covers (desync.ChunkerWindowSize).
const chunkerWindow = desync.ChunkerWindowSize

// buzhash cuts chunks exactly where desync's Chunker does (the Algorithm of every index),
// at a fraction of its CPU: desync divides at every byte, keeps its window in a ring and
// reads into a new buffer of ten maximum chunks whenever less than one is left, which
// made it a third of packing's CPU. The cut is a pure function of the 48 bytes before
// it, so the same table and test give the same chunks; TestChunkerCutsAsDesync holds the
// two to it.
type buzhash struct {
	table    [256]uint32
	min, max int
	disc     uint32 // a chunk ends where the hash modulo disc is disc-1
	fastmod  uint64 // for the remainder by disc without a division (Lemire et al. 2019)
}

func newBuzhash(p Params) *buzhash {
	avg := float64(p.Avg)
	// desync's (and casync's) discriminator for a mean chunk size (desync chunker.go,
	// discriminatorFromAvg).
	disc := uint32(avg / (-1.42888852e-7*avg + 1.33237515))
	return &buzhash{table: desyncTable(), min: int(p.Min), max: int(p.Max), disc: disc, fastmod: ^uint64(0)/uint64(disc) + 1}
}

// desyncTable reads desync's hash table through its exported rolling hash rather than
// restating it: a window of w copies of byte a hashes to the XOR of T[a] rotated left by 0
// to w-1, whose lowest bit desync's boundary test with a discriminator of 2 tells; each
// longer window adds one more bit of T[a].
func desyncTable() [256]uint32 {
	var t [256]uint32
	for a := range 256 {
		var prev uint32
		for w := 1; w <= 32; w++ {
			h := desync.NewHash(w, 2)
			window := make([]byte, w)
			for i := range window {
				window[i] = byte(a)
			}
			h.Initialize(window)
			var low uint32
			if h.IsBoundary() {
				low = 1
			}
			// Rotated left by w-1, bit (32-(w-1))%32 of T[a] is the new lowest bit.
			t[a] |= (low ^ prev) << ((33 - w) % 32)
			prev = low
		}
	}
	return t
}

// next is the length of the chunk at the start of b, which holds what is left of the
// extent or at least max bytes of it.
func (z *buzhash) next(b []byte) int {
	if len(b) <= z.min {
		return len(b)
	}
	m := min(len(b), z.max)
	var h uint32
	for i, c := range b[z.min-chunkerWindow : z.min] {
		h ^= bits.RotateLeft32(z.table[c], chunkerWindow-1-i)
	}
	t, d, d1, fm := &z.table, uint64(z.disc), z.disc-1, z.fastmod
	in, out := b[z.min:m], b[z.min-chunkerWindow:m-chunkerWindow]
	for i := range len(in) - 1 {
		h = bits.RotateLeft32(h, 1) ^ bits.RotateLeft32(t[out[i]], chunkerWindow) ^ t[in[i]]
		if rem, _ := bits.Mul64(fm*uint64(h), d); uint32(rem) == d1 {
			return z.min + i + 1
		}
	}
	return m
}

// cutExtent cuts the extent e of f into chunks, calling each with every chunk's offset in
// f and bytes, which stay valid only during the call. buf is reused from extent to extent.
func (z *buzhash) cutExtent(ctx context.Context, f *os.File, e extent, buf []byte, each func(off int64, b []byte) error) error {
	var start, end int // the bytes of buf not yet cut, read from f at e.off+pos
	pos := int64(0)    // the extent's bytes read so far
	for {
		if end-start < z.max && pos < e.len {
			if err := ctx.Err(); err != nil {
				return err
			}
			copy(buf, buf[start:end])
			end -= start
			start = 0
			n := int(min(int64(len(buf)-end), e.len-pos))
			if _, err := f.ReadAt(buf[end:end+n], e.off+pos); err != nil {
				return fmt.Errorf("reading %s at %d: %w", f.Name(), e.off+pos, err)
			}
			end += n
			pos += int64(n)
		}
		if start == end {
			return nil
		}
		n := z.next(buf[start:end])
		if err := each(e.off+pos-int64(end-start), buf[start:start+n]); err != nil {
			return err
		}
		start += n
	}
}
