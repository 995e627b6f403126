package diskpack

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/ncw/directio"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"
)

// ChunkError says a chunk's bytes are not what the index says: where it was read from
// (Source: "the pack", a registry, an earlier seed), at which disk offset, and how.
type ChunkError struct {
	Source string
	Offset int64
	Want   digest.Digest
	Got    digest.Digest
	What   string // "blob digest", "blake3 check", "raw digest", or a decoding error
}

func (e *ChunkError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("chunk %s at disk offset %d in %s: %s", e.Want.Encoded()[:12], e.Offset, e.Source, e.What)
	}
	return fmt.Sprintf("chunk at disk offset %d in %s: %s mismatch: the index says %s, the bytes are %s",
		e.Offset, e.Source, e.What, e.Want, e.Got)
}

// Reader reads a packed disk: the pack through r, laid out as the index says.
type Reader struct {
	r       io.ReaderAt
	x       *Index
	name    string
	offsets map[digest.Digest]int64
	dec     *zstd.Decoder
	jobs    int // chunks decoded at once
}

// NewReader reads the pack r (name says what it is in errors) that x describes. Close
// releases the decoder.
func NewReader(r io.ReaderAt, x *Index, name string) (*Reader, error) {
	blobs, _ := x.Blobs()
	offsets := make(map[digest.Digest]int64, len(blobs))
	for _, b := range blobs {
		offsets[b.Digest] = b.Offset
	}
	dec, err := NewDecoder(x)
	if err != nil {
		return nil, err
	}
	return &Reader{r: r, x: x, name: name, offsets: offsets, dec: dec, jobs: runtime.NumCPU()}, nil
}

// NewDecoder returns a decoder that never makes more than a chunk of x's maximum size.
func NewDecoder(x *Index) (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.NumCPU()),
		zstd.WithDecoderMaxMemory(uint64(min(x.Params.Max, MaxChunkSize))))
}

// Close releases the decoder.
func (r *Reader) Close() { r.dec.Close() }

// Stored returns the compressed bytes of blob b as they lie in the pack.
func (r *Reader) Stored(b Blob) *io.SectionReader {
	return io.NewSectionReader(r.r, b.Offset, b.Size)
}

// Chunk reads, decompresses and checks chunk c, returning its raw bytes.
func (r *Reader) Chunk(c Chunk) ([]byte, error) {
	return r.chunkInto(c, nil)
}

// chunkBuffers are a reader's buffers for one chunk at a time, kept at the index's
// largest chunk so that one pair serves every chunk.
type chunkBuffers struct {
	stored, raw []byte
	// direct places a chunk's raw bytes at its disk offset modulo directBlock inside raw,
	// which is aligned to directBlock, so the chunk's whole blocks lie in aligned memory
	// (WriteAtDirect).
	direct bool
}

// chunkInto is Chunk with b's buffers (nil: new ones of the chunk's size). The raw bytes it
// returns are b's until its next use.
func (r *Reader) chunkInto(c Chunk, b *chunkBuffers) ([]byte, error) {
	off, ok := r.offsets[c.Blob]
	if !ok {
		return nil, fmt.Errorf("chunk %s is not in the index of %s", c.Blob, r.name)
	}
	var stored, raw []byte
	if b == nil {
		stored, raw = make([]byte, c.Stored), make([]byte, 0, c.Size)
	} else {
		if int64(cap(b.stored)) < c.Stored {
			// An index that was never validated may hold a chunk larger than its Max.
			b.stored = make([]byte, max(c.Stored, maxStored(r.x.Params.Max)))
		}
		stored, raw = b.stored[:c.Stored], b.rawFor(c, r.x.Params.Max)
	}
	if _, err := r.r.ReadAt(stored, off); err != nil {
		return nil, fmt.Errorf("reading %s at %d: %w", r.name, off, err)
	}
	out, err := decodeChunkInto(r.dec, c, stored, raw, r.name)
	if err != nil || b == nil || !b.direct || len(out) == 0 || &out[0] == &raw[:1][0] {
		return out, err
	}
	// The decoder wrote elsewhere: the bytes go where their blocks are aligned.
	return raw[:copy(raw[:len(out)], out)], nil
}

// rawFor is the buffer chunk c is decoded into (empty, with room for it), grown to the
// index's largest chunk the first time.
func (b *chunkBuffers) rawFor(c Chunk, largest int64) []byte {
	if !b.direct {
		if int64(cap(b.raw)) < c.Size {
			b.raw = make([]byte, 0, max(c.Size, largest))
		}
		return b.raw
	}
	shift := c.Offset % directBlock
	if int64(cap(b.raw)) < shift+c.Size {
		b.raw = directio.AlignedBlock(int(max(c.Size, largest) + directBlock))[:0]
	}
	return b.raw[shift:shift]
}

// decodeChunkInto checks the stored bytes of c (c.Checker) and decompresses them into raw
// (reused when large enough). That is the whole check: the index (itself checked against
// the seed's manifest) binds it to the chunk's raw bytes, decompression is deterministic,
// and the zstd frame's own checksum guards the decoder. Hashing the stored bytes instead
// of the raw ones saves a third of the hashing, and BLAKE3 instead of sha256 most of the
// rest: together the bulk of a seed write's work.
func decodeChunkInto(dec *zstd.Decoder, c Chunk, stored, raw []byte, source string) ([]byte, error) {
	if k := c.Checker(); !storedOK(k, stored) || int64(len(stored)) != c.Stored {
		return nil, &ChunkError{Source: source, Offset: c.Offset, Want: k.Want(), Got: k.Got(), What: k.What()}
	}
	if int64(cap(raw)) < c.Size {
		raw = make([]byte, 0, c.Size)
	}
	raw, err := dec.DecodeAll(stored, raw[:0])
	if err != nil {
		return nil, &ChunkError{Source: source, Offset: c.Offset, Want: c.Blob, What: "cannot be decompressed: " + err.Error()}
	}
	if int64(len(raw)) != c.Size {
		return nil, &ChunkError{Source: source, Offset: c.Offset, Want: c.Blob,
			What: fmt.Sprintf("decompresses to %d bytes, the index says %d", len(raw), c.Size)}
	}
	return raw, nil
}

// WriteTo streams the whole raw disk to w in order, zeros where no chunk is, checking
// every chunk as it goes (inOrder: decompressed ahead on every core, a bounded number at
// a time).
func (r *Reader) WriteTo(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	zeros := make([]byte, 1<<20)
	pad := func(to int64) error {
		for n < to {
			k, err := w.Write(zeros[:min(int64(len(zeros)), to-n)])
			n += int64(k)
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := r.inOrder(ctx, func(c Chunk, raw []byte) error {
		if err := pad(c.Offset); err != nil {
			return err
		}
		k, err := w.Write(raw)
		n += int64(k)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, pad(r.x.Size)
}

// inOrder decompresses and checks the disk's chunks on r.jobs cores, at most twice as many
// ahead of use, and hands each one's raw bytes (valid only during the call) to use in
// disk order. The first error, use's or a chunk's, stops it.
func (r *Reader) inOrder(ctx context.Context, use func(Chunk, []byte) error) error {
	type result struct {
		b   *chunkBuffers
		raw []byte
		err error
	}
	ahead := make(chan chan result, 2*r.jobs)
	sem := make(chan struct{}, r.jobs)
	// Buffers go back for the next chunk once used: a write of a 16 GiB disk would
	// otherwise allocate (and zero) its 10 GiB of data and pack once more.
	pool := sync.Pool{New: func() any { return &chunkBuffers{} }}
	g, gctx := errgroup.WithContext(ctx)
	// Decoders still running when use stops must finish before inOrder returns: the
	// caller closes the shared zstd decoder next.
	var decoding sync.WaitGroup
	defer decoding.Wait()
	g.Go(func() error {
		defer close(ahead)
		for _, c := range r.x.Chunks {
			ch := make(chan result, 1)
			select {
			case ahead <- ch:
			case <-gctx.Done():
				return gctx.Err()
			}
			sem <- struct{}{}
			decoding.Go(func() {
				defer func() { <-sem }()
				b := pool.Get().(*chunkBuffers)
				raw, err := r.chunkInto(c, b)
				ch <- result{b, raw, err}
			})
		}
		return nil
	})
	g.Go(func() error {
		i := 0
		for ch := range ahead {
			res := <-ch
			if res.err != nil {
				return res.err
			}
			err := use(r.x.Chunks[i], res.raw)
			pool.Put(res.b)
			if err != nil {
				return err
			}
			if err := gctx.Err(); err != nil {
				return err
			}
			i++
		}
		return nil
	})
	return g.Wait()
}

// Stream returns the raw disk as a reader (WriteTo through a pipe); closing it stops the
// stream and returns once WriteTo has, so that the reader may be closed next.
func (r *Reader) Stream(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := r.WriteTo(ctx, pw)
		pw.CloseWithError(err)
	}()
	return &stream{PipeReader: pr, cancel: cancel, done: done}
}

type stream struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   <-chan struct{}
}

func (s *stream) Close() error {
	s.cancel()
	err := s.PipeReader.Close()
	<-s.done
	return err
}

// WriteAt writes every chunk of the disk at its offset in w, decompressing and checking
// each on every core, a bounded number at a time (at most twice the cores' worth of
// chunks in memory). Ranges without a chunk are not written: w must read as zeros there
// already (a fresh sparse file, or zeroed ahead). Chunks land out of order; a failure
// leaves w partly written.
func (r *Reader) WriteAt(ctx context.Context, w io.WriterAt) error {
	// One write at a time: a file system takes the file's lock for every buffered write
	// anyway (ext4's i_rwsem), and a writer waiting for it there spins on a core that could
	// be decoding (a tenth of a 16 GiB write's CPU); here it waits asleep.
	var one sync.Mutex
	return r.eachChunk(ctx, r.x.Chunks, false, func(c Chunk, raw []byte) error {
		one.Lock()
		_, err := w.WriteAt(raw, c.Offset)
		one.Unlock()
		if err != nil {
			return fmt.Errorf("writing the chunk at %d: %w", c.Offset, err)
		}
		return nil
	})
}

// Check decompresses and checks every distinct chunk of the disk on every core, as
// WriteAt does, writing nothing: a chunk stored once and used at several offsets is
// checked once.
func (r *Reader) Check(ctx context.Context) error {
	seen := make(map[digest.Digest]bool, len(r.x.Chunks))
	distinct := make([]Chunk, 0, len(r.x.Chunks))
	for _, c := range r.x.Chunks {
		if !seen[c.Blob] {
			seen[c.Blob] = true
			distinct = append(distinct, c)
		}
	}
	return r.eachChunk(ctx, distinct, false, func(Chunk, []byte) error { return nil })
}

// eachChunk decompresses and checks chunks on every core, a bounded number at a time, and
// hands each one's raw bytes (valid only during the call) to use; with direct, in memory
// aligned as chunkBuffers.direct says.
func (r *Reader) eachChunk(ctx context.Context, chunks []Chunk, direct bool, use func(Chunk, []byte) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2 * r.jobs)
	// Buffers go back for the next chunk: a write of a 16 GiB disk would otherwise
	// allocate (and zero) its 10 GiB of data and pack once more.
	pool := sync.Pool{New: func() any { return &chunkBuffers{direct: direct} }}
	for _, c := range chunks {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			b := pool.Get().(*chunkBuffers)
			defer pool.Put(b)
			raw, err := r.chunkInto(c, b)
			if err != nil {
				return err
			}
			return use(c, raw)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}
