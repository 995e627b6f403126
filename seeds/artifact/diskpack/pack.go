package diskpack

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"
)

// piece is a chunk cut from the disk, on its way through hashing and compression.
type piece struct {
	seq    int
	off    int64
	data   []byte
	id     digest.Digest
	zero   bool
	stored []byte
	blob   digest.Digest // of stored
	check  string        // of stored
	// blobHash is the sha256 that hashed stored into blob: a group beginning with this
	// chunk continues it, so that no chunk's bytes are hashed twice for blob and group.
	blobHash hash.Hash
}

// chunkFile cuts the data of f's first size bytes into chunks and calls each with every
// chunk in disk order, after work (run on jobs goroutines) has hashed it and, unless it is
// all zeros, done what else it does. At most 2*jobs chunks are in flight, so memory stays
// bounded whatever the disk's size.
func chunkFile(ctx context.Context, f *os.File, size int64, p Params, jobs int, work func(*piece) error, each func(*piece) error) error {
	if err := p.validate(); err != nil {
		return err
	}
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	exts, err := dataExtents(f, size, p.Max)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	todo := make(chan *piece)
	done := make(chan *piece, 2*jobs)
	slots := make(chan struct{}, 2*jobs)
	g.Go(func() error {
		defer close(todo)
		return cutChunks(gctx, f, exts, p, todo, slots)
	})
	workers, wctx := errgroup.WithContext(gctx)
	for range jobs {
		workers.Go(func() error { return hashChunks(wctx, todo, done, work) })
	}
	g.Go(func() error {
		err := workers.Wait()
		close(done)
		return err
	})
	g.Go(func() error { return inDiskOrder(done, slots, each) })
	return g.Wait()
}

// cutChunks cuts the data extents of f into chunks and sends them to todo, numbered in
// disk order; each takes a slot first, which inDiskOrder frees, to bound the chunks in
// flight.
func cutChunks(ctx context.Context, f *os.File, exts []extent, p Params, todo chan<- *piece, slots chan<- struct{}) error {
	z := newBuzhash(p)
	buf := make([]byte, 4*p.Max)
	seq := 0
	send := func(off int64, b []byte) error {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		// A copy: b lies in the buffer the next chunks are read into.
		case todo <- &piece{seq: seq, off: off, data: bytes.Clone(b)}:
		case <-ctx.Done():
			return ctx.Err()
		}
		seq++
		return nil
	}
	for _, e := range exts {
		if err := z.cutExtent(ctx, f, e, buf, send); err != nil {
			return err
		}
	}
	return nil
}

// hashChunks is one worker: it tells zero chunks, hashes the others and runs work on
// them, and passes every chunk on to done.
func hashChunks(ctx context.Context, todo <-chan *piece, done chan<- *piece, work func(*piece) error) error {
	zero := make([]byte, 64<<10)
	for pc := range todo {
		pc.zero = allZero(pc.data, zero)
		if !pc.zero {
			pc.id = sha256Of(pc.data)
			if err := work(pc); err != nil {
				return err
			}
		}
		select {
		case done <- pc:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// inDiskOrder calls each with the non-zero chunks in disk order (workers finish out of
// order) and frees a slot for every chunk.
func inDiskOrder(done <-chan *piece, slots <-chan struct{}, each func(*piece) error) error {
	waiting := map[int]*piece{}
	next := 0
	for pc := range done {
		waiting[pc.seq] = pc
		for {
			pc, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			if !pc.zero {
				if err := each(pc); err != nil {
					return err
				}
			}
			<-slots
		}
	}
	return nil
}

func allZero(b, zero []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zero))
		if !bytes.Equal(b[:n], zero[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// newEncoder is the one compressor every chunk goes through: the same settings give the
// same bytes, so a chunk compressed again elsewhere has the same blob digest.
func newEncoder(jobs int) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(max(jobs, 1)))
}

// Packed is what Pack made: the index, and the digests of the pack and of the raw disk,
// hashed as they went by so that nobody reads either again to describe them.
type Packed struct {
	*Index
	PackSize   int64
	PackDigest digest.Digest
	RawDigest  digest.Digest
}

// Pack chunks the disk in f (its first size bytes), compresses every chunk, writes each
// distinct one to pack in disk order, and returns the index. jobs bounds the chunks
// hashed and compressed at once (0: one per core).
func Pack(ctx context.Context, f *os.File, size int64, pack io.Writer, p Params, jobs int, opts ...PackOption) (*Packed, error) {
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	groupChunks, err := packGroupChunks(f, size, p, opts)
	if err != nil {
		return nil, err
	}
	enc, err := newEncoder(jobs)
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	x := &Index{Version: IndexVersion, Size: size, Algorithm: Algorithm, Params: p, Compression: CompressionZstd, GroupChunks: groupChunks}
	res := &Packed{Index: x}
	groups := newGrouper(x.GroupChunks)
	packHash := digest.SHA256.Digester()
	// The raw digest covers the whole disk, zeros too: on a sparse disk most of what it
	// hashes. It runs beside the pack's writer rather than in it, so the two serial hashes
	// share the cores.
	raw := make(chan *piece, 1)
	rawDigest := make(chan digest.Digest, 1)
	go func() { rawDigest <- hashRaw(raw, size) }()
	written := map[digest.Digest]Chunk{}
	compress := func(pc *piece) error {
		pc.stored = enc.EncodeAll(pc.data, make([]byte, 0, len(pc.data)/2))
		pc.blobHash = sha256.New()
		pc.blobHash.Write(pc.stored)
		pc.blob = digest.NewDigest(digest.SHA256, pc.blobHash)
		pc.check = checkOf(pc.stored)
		return nil
	}
	each := func(pc *piece) error {
		raw <- pc
		if c, ok := written[pc.id]; ok {
			c.Offset = pc.off
			x.Chunks = append(x.Chunks, c)
			return nil
		}
		c := Chunk{Offset: pc.off, Size: int64(len(pc.data)), ID: pc.id, Blob: pc.blob, Stored: int64(len(pc.stored)), Check: pc.check}
		if _, err := pack.Write(pc.stored); err != nil {
			return fmt.Errorf("writing the pack: %w", err)
		}
		packHash.Hash().Write(pc.stored)
		if err := groups.add(pc.blob, pc.id, pc.stored, pc.blobHash); err != nil {
			return fmt.Errorf("hashing chunk groups: %w", err)
		}
		res.PackSize += int64(len(pc.stored))
		written[pc.id] = c
		x.Chunks = append(x.Chunks, c)
		return nil
	}
	err = chunkFile(ctx, f, size, p, jobs, compress, each)
	close(raw)
	res.RawDigest = <-rawDigest
	if err != nil {
		return nil, err
	}
	res.PackDigest = packHash.Digest()
	if err := groups.assign(x); err != nil {
		return nil, fmt.Errorf("hashing chunk groups: %w", err)
	}
	return res, x.Validate()
}

// packGroupChunks is the mean group length for the disk in f: the options', else
// GroupChunksFor its data.
func packGroupChunks(f *os.File, size int64, p Params, opts []PackOption) (int, error) {
	var c packConfig
	for _, o := range opts {
		o(&c)
	}
	if c.groupChunks > 0 {
		return c.groupChunks, nil
	}
	exts, err := dataExtents(f, size, p.Max)
	if err != nil {
		return 0, err
	}
	var data int64
	for _, e := range exts {
		data += e.len
	}
	return GroupChunksFor(data, p), nil
}

// hashRaw hashes the disk of size bytes whose data pieces come in order on pieces, zeros
// between and after them.
func hashRaw(pieces <-chan *piece, size int64) digest.Digest {
	h := digest.SHA256.Digester()
	zeros := make([]byte, 1<<20)
	var end int64
	zerosTo := func(off int64) {
		for end < off {
			n := min(int64(len(zeros)), off-end)
			h.Hash().Write(zeros[:n])
			end += n
		}
	}
	for pc := range pieces {
		zerosTo(pc.off)
		h.Hash().Write(pc.data)
		end += int64(len(pc.data))
	}
	zerosTo(size)
	return h.Digest()
}

// PackFiles packs the raw disk file raw into the files pack (0600: a disk keeps the
// cluster's private keys) and index.
func PackFiles(ctx context.Context, raw, pack, index string, p Params, opts ...PackOption) (*Packed, error) {
	in, err := os.Open(raw)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return nil, err
	}
	out, err := os.OpenFile(pack, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 4<<20)
	x, err := Pack(ctx, in, fi.Size(), bw, p, 0, opts...)
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", raw, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", pack, err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", pack, err)
	}
	b, err := x.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(index, b, 0o644); err != nil {
		return nil, err
	}
	return x, nil
}
