package ociseed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

// packFiller writes the staged pack of a pull, group by group.
type packFiller struct {
	src      source
	ds       *deltaSeed
	f        *os.File
	old      *diskpack.Old
	o        options
	resuming bool // the staged pack has the right size: an interrupted pull's chunks may be in it
	firstUse map[digest.Digest]diskpack.Chunk
	p        *progress

	fetched, fetchedBytes, reused, reusedBytes, resumed, resumedBytes, requests, ranges atomic.Int64
}

// fillGroup writes the chunks of one unit (fillUnits: a group, or a run of groups of a
// pack blob) of blob desc: staged or reused where it can, the rest fetched.
func (pf *packFiller) fillGroup(ctx context.Context, g diskpack.Group, desc ocispec.Descriptor) error {
	var need []diskpack.Blob
	for _, b := range g.Blobs {
		c := pf.firstUse[b.Digest]
		what := blob{desc: ocispec.Descriptor{Digest: b.Digest, Size: b.Size}, what: fmt.Sprintf("chunk at disk offset %d", c.Offset)}
		switch {
		case pf.resuming && stagedOK(pf.f, b):
			pf.resumed.Add(1)
			pf.resumedBytes.Add(b.Size)
		case pf.reuse(ctx, b, c):
			pf.reused.Add(1)
			pf.reusedBytes.Add(b.Size)
		default:
			need = append(need, b)
			continue
		}
		pf.p.add(what, 0)
	}
	for _, s := range spans(desc, need) {
		if err := pf.fetchSpanTwice(ctx, s); err != nil {
			return err
		}
		pf.requests.Add(1)
		if !s.whole {
			pf.ranges.Add(1)
		}
		for _, b := range s.blobs {
			pf.fetched.Add(1)
			pf.fetchedBytes.Add(b.Size)
			pf.p.add(blob{desc: ocispec.Descriptor{Digest: b.Digest, Size: b.Size}, what: fmt.Sprintf("chunk at disk offset %d", pf.firstUse[b.Digest].Offset)}, b.Size)
		}
	}
	return nil
}

// reuse writes chunk b (first used at c) from the earlier disk, if it has it intact.
func (pf *packFiller) reuse(ctx context.Context, b diskpack.Blob, c diskpack.Chunk) bool {
	if pf.old == nil {
		return false
	}
	stored, err := pf.old.Stored(c)
	if err != nil {
		pf.o.logger.WarnContext(ctx, "a chunk of the earlier disk is damaged; fetching it instead", "error", err)
	}
	if stored == nil {
		return false
	}
	if _, err := pf.f.WriteAt(stored, b.Offset); err != nil {
		return false // fetched instead, and that write's error is the one reported
	}
	return true
}

// span is a run of consecutive chunks of one group's blob, fetched in one request.
type span struct {
	desc  ocispec.Descriptor // the group's blob
	whole bool               // the run is the whole group: a plain GET
	at    int64              // where the run begins inside the blob
	size  int64
	blobs []diskpack.Blob
}

// spans cuts need (chunks of blob desc, each At its offset in it, in order) into runs of
// neighbours; a run that is the whole blob is fetched as the blob.
func spans(desc ocispec.Descriptor, need []diskpack.Blob) []span {
	var out []span
	for _, b := range need {
		if n := len(out); n > 0 && out[n-1].at+out[n-1].size == b.At {
			out[n-1].size += b.Size
			out[n-1].blobs = append(out[n-1].blobs, b)
			continue
		}
		out = append(out, span{desc: desc, at: b.At, size: b.Size, blobs: []diskpack.Blob{b}})
	}
	if len(out) == 1 && out[0].at == 0 && out[0].size == desc.Size {
		out[0].whole = true
	}
	return out
}

// stagedOK tells whether the staged pack already holds blob b.
func stagedOK(f *os.File, b diskpack.Blob) bool {
	k := b.Checker()
	n, err := io.Copy(k, io.NewSectionReader(f, b.Offset, b.Size))
	return err == nil && n == b.Size && k.OK()
}

// firstUses maps every blob of x to the first chunk that uses it, which names it in messages.
func firstUses(x *diskpack.Index) map[digest.Digest]diskpack.Chunk {
	firstUse := map[digest.Digest]diskpack.Chunk{}
	for _, c := range x.Chunks {
		if _, ok := firstUse[c.Blob]; !ok {
			firstUse[c.Blob] = c
		}
	}
	return firstUse
}

// fetchSpanTwice fetches span s into the pack, once more when its bytes do not match the
// index: a transfer can be damaged once, a registry whose copy is damaged serves it wrong
// again, and that is a damagedChunk. A body that breaks on the way is a failed transfer,
// fetched again under the retry policy of every request (netlimit).
func (pf *packFiller) fetchSpanTwice(ctx context.Context, s span) error {
	var err error
	var ce *diskpack.ChunkError
	fetch := func() error { return pf.fetchSpan(ctx, s) }
	for attempt := 0; attempt < 2; attempt++ {
		if err = netlimit.DefaultPolicy().Do(ctx, fetch); err == nil {
			return nil
		}
		if ctx.Err() != nil || !errors.As(err, &ce) {
			return err
		}
		pf.o.logger.WarnContext(ctx, "a fetched chunk did not match its digest", "error", err, "attempt", attempt+1)
	}
	return damagedChunk{ce}
}

// openSpan opens the bytes of s: the whole blob, or a range of it. checked says the source
// checks the whole blob's digest by the time it has been read to its end.
func (pf *packFiller) openSpan(ctx context.Context, s span) (rc io.ReadCloser, checked bool, err error) {
	if !s.whole {
		rc, err = fetchRange(ctx, pf.src, s.desc, s.at, s.size)
		return rc, false, err
	}
	fetch, checked := pf.src.fetch, pf.src.checksDigests()
	if us, ok := pf.src.(uncheckedSource); ok && s.blobs[0].Check != "" {
		fetch, checked = us.fetchUnchecked, false
	}
	rc, err = fetch(ctx, s.desc)
	return rc, checked, err
}

// fetchSpan fetches the chunks of s into the pack, each at its offset, and checks each: by
// its Check where the index has one (BLAKE3, a sixth of sha256's work here), else by its
// digest; a whole single-chunk blob from a source that checks digests, by the source.
func (pf *packFiller) fetchSpan(ctx context.Context, s span) error {
	if err := ctx.Err(); err != nil {
		// Another chunk failed or the pull was stopped: its cause, not this chunk's, is
		// what the caller reports.
		return err
	}
	rc, checked, err := pf.openSpan(ctx, s)
	if err != nil {
		return fmt.Errorf("chunk at disk offset %d: %w", pf.firstUse[s.blobs[0].Digest].Offset, err)
	}
	defer rc.Close()
	from := "the registry's blob " + s.desc.Digest.String()
	if !s.whole {
		from += fmt.Sprintf(" (bytes %d to %d)", s.at, s.at+s.size)
	}
	for _, b := range s.blobs {
		if err := pf.copyChunk(rc, b, checked && len(s.blobs) == 1, from); err != nil {
			return err
		}
	}
	if !s.whole {
		return nil
	}
	// Read on to the end: go-containerregistry checks the digest only there, and a longer
	// answer than the blob's size is a wrong one.
	var extra [1]byte
	switch k, err := io.ReadFull(rc, extra[:]); {
	case k > 0:
		c := pf.firstUse[s.blobs[len(s.blobs)-1].Digest]
		return &diskpack.ChunkError{Source: from, Offset: c.Offset, Want: s.desc.Digest, What: fmt.Sprintf("holds more than the %d bytes the index says", s.size)}
	case err != io.EOF:
		return pf.readError(err, from, s.blobs[len(s.blobs)-1])
	}
	return nil
}

// copyChunk copies chunk b from r to its place in the pack and checks it, unless checked
// says the source does.
func (pf *packFiller) copyChunk(r io.Reader, b diskpack.Blob, checked bool, from string) error {
	c := pf.firstUse[b.Digest]
	var w io.Writer = io.NewOffsetWriter(pf.f, b.Offset)
	k := b.Checker()
	if !checked {
		w = io.MultiWriter(w, k)
	}
	// Only the chunk's size reaches the pack: a longer answer must not spill into the next
	// chunk's place, which may be fetched and checked already.
	n, err := io.CopyN(w, r, b.Size)
	if err != nil && err != io.EOF {
		return pf.readError(err, from, b)
	}
	if n != b.Size {
		return &diskpack.ChunkError{Source: from, Offset: c.Offset, Want: b.Digest, What: fmt.Sprintf("holds %d bytes, the index says %d", n, b.Size)}
	}
	if !checked && !k.OK() {
		return &diskpack.ChunkError{Source: from, Offset: c.Offset, Want: k.Want(), Got: k.Got(), What: k.What()}
	}
	return nil
}

// readError is a failed read of chunk b: go-containerregistry's digest check failing is a
// ChunkError, anything else a failed transfer.
func (pf *packFiller) readError(err error, from string, b diskpack.Blob) error {
	c := pf.firstUse[b.Digest]
	if strings.Contains(err.Error(), "error verifying") {
		// go-containerregistry checks the digest as it reads, with an error type of its own
		// internal package: the blob's bytes are not its digest.
		return &diskpack.ChunkError{Source: from, Offset: c.Offset, Want: b.Digest, What: err.Error()}
	}
	return fmt.Errorf("chunk at disk offset %d from %s: %w", c.Offset, from, err)
}

// rangeSource is a source that can fetch part of a blob (a registry, by HTTP range).
type rangeSource interface {
	fetchRange(ctx context.Context, d ocispec.Descriptor, off, n int64) (io.ReadCloser, error)
}

// fetchRange opens n bytes of blob d from off, unchecked. A source without ranges (a
// layout, an archive: local files) is read from the start, the bytes before off dropped.
func fetchRange(ctx context.Context, src source, d ocispec.Descriptor, off, n int64) (io.ReadCloser, error) {
	if rs, ok := src.(rangeSource); ok {
		return rs.fetchRange(ctx, d, off, n)
	}
	rc, err := src.fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	if sk, ok := rc.(io.Seeker); ok {
		if _, err := sk.Seek(off, io.SeekStart); err != nil {
			rc.Close()
			return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
		}
		return limitedBody(rc, n), nil
	}
	return skipTo(rc, off, n)
}
