package diskpack

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
)

// Old offers the chunks of an earlier disk, so that a transfer fetches only the chunks
// it lacks: either a packed disk (its pack and index) or any raw disk, a device being
// rewritten included, which is chunked on open with the new index's parameters. Every
// chunk taken from it is checked against the digest the new index gives; one that does
// not match is reported (*ChunkError) and not used.
type Old struct {
	name string
	pack *Reader
	byID map[digest.Digest]Chunk
	raw  io.ReaderAt
	enc  *zstd.Encoder
}

// OldPack offers the chunks of the pack r that x describes.
func OldPack(r io.ReaderAt, x *Index, name string) (*Old, error) {
	pr, err := NewReader(r, x, name)
	if err != nil {
		return nil, err
	}
	byID := make(map[digest.Digest]Chunk, len(x.Chunks))
	for _, c := range x.Chunks {
		byID[c.ID] = c
	}
	enc, err := newEncoder(0)
	if err != nil {
		return nil, err
	}
	return &Old{name: name, pack: pr, byID: byID, enc: enc}, nil
}

// OldRaw offers the chunks of the raw disk in f (its first size bytes), cut with p: the
// parameters of the index that will ask for them, so that equal content gives equal chunks.
func OldRaw(ctx context.Context, f *os.File, size int64, p Params, name string) (*Old, error) {
	byID := map[digest.Digest]Chunk{}
	each := func(pc *piece) error {
		byID[pc.id] = Chunk{Offset: pc.off, Size: int64(len(pc.data)), ID: pc.id}
		return nil
	}
	if err := chunkFile(ctx, f, size, p, 0, func(*piece) error { return nil }, each); err != nil {
		return nil, fmt.Errorf("indexing %s: %w", name, err)
	}
	enc, err := newEncoder(0)
	if err != nil {
		return nil, err
	}
	return &Old{name: name, byID: byID, raw: f, enc: enc}, nil
}

// Close releases the coders.
func (o *Old) Close() {
	if o.pack != nil {
		o.pack.Close()
	}
	o.enc.Close()
}

// Name says what the old disk is.
func (o *Old) Name() string { return o.name }

// Stored returns c's compressed bytes, exactly those whose digest is c.Blob, made from
// the old disk's copy of c. It returns nil, nil when the old disk has no such chunk, or
// when its copy compresses to other bytes (another compressor made the new index), and a
// *ChunkError when its copy is damaged.
func (o *Old) Stored(c Chunk) ([]byte, error) {
	old, ok := o.byID[c.ID]
	if !ok {
		return nil, nil
	}
	if o.pack != nil && old.Blob == c.Blob {
		b := make([]byte, old.Stored)
		if _, err := o.pack.Stored(Blob{Offset: o.pack.offsets[old.Blob], Size: old.Stored}).ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("reading %s: %w", o.name, err)
		}
		if k := c.Checker(); !storedOK(k, b) {
			return nil, &ChunkError{Source: o.name, Offset: old.Offset, Want: k.Want(), Got: k.Got(), What: k.What()}
		}
		return b, nil
	}
	raw, err := o.Raw(c)
	if err != nil || raw == nil {
		return nil, err
	}
	b := o.enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if !storedOK(c.Checker(), b) {
		return nil, nil
	}
	return b, nil
}

// Raw returns c's raw bytes from the old disk, checked against c.ID; nil, nil when the old
// disk has no such chunk.
func (o *Old) Raw(c Chunk) ([]byte, error) {
	old, ok := o.byID[c.ID]
	if !ok {
		return nil, nil
	}
	var raw []byte
	if o.pack != nil {
		// The old pack's chunk is checked against the old index; its raw bytes must also
		// be the ID the new index asks for, whatever the old index claims.
		var err error
		if raw, err = o.pack.Chunk(old); err != nil {
			return nil, err
		}
	} else {
		raw = make([]byte, old.Size)
		if _, err := o.raw.ReadAt(raw, old.Offset); err != nil {
			return nil, fmt.Errorf("reading %s at %d: %w", o.name, old.Offset, err)
		}
	}
	if got := sha256Of(raw); got != c.ID {
		return nil, &ChunkError{Source: o.name, Offset: old.Offset, Want: c.ID, Got: got, What: "raw digest (it changed since it was read)"}
	}
	return raw, nil
}

// Diff is how much of one disk another already holds.
type Diff struct {
	Chunks, SharedChunks int   // distinct chunks of the new disk, and those the old one has
	Bytes, SharedBytes   int64 // their raw bytes
	Stored, SharedStored int64 // their compressed bytes: what a pull or write --from fetches, and saves
	// Groups are the new disk's chunk groups, SharedGroups those the old one has as they
	// are, and PushStored the stored bytes of the others: what a push after the old
	// disk's sends, whole groups holding any chunk it lacks.
	Groups, SharedGroups int
	PushStored           int64
}

// Compare tells how much of new's content old already holds, chunk by chunk and group by
// group.
func Compare(old, new *Index) Diff {
	have := make(map[digest.Digest]bool, len(old.Chunks))
	for _, c := range old.Chunks {
		have[c.ID] = true
	}
	var d Diff
	oldGroups := map[digest.Digest]bool{}
	for _, g := range old.Groups() {
		oldGroups[g.Digest] = true
	}
	for _, g := range new.Groups() {
		d.Groups++
		if oldGroups[g.Digest] {
			d.SharedGroups++
		} else {
			d.PushStored += g.Size
		}
	}
	seen := map[digest.Digest]bool{}
	for _, c := range new.Chunks {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		d.Chunks++
		d.Bytes += c.Size
		d.Stored += c.Stored
		if have[c.ID] {
			d.SharedChunks++
			d.SharedBytes += c.Size
			d.SharedStored += c.Stored
		}
	}
	return d
}
