package ociseed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// stagingPrefix names the directory in which Pull assembles a seed, one per artifact digest.
const stagingPrefix = ".seed-pull-"

// Inspect returns the seed manifest of the seed at ref, reading only the artifact manifest
// and its config.
func Inspect(ctx context.Context, ref string, opts ...Option) (*seed.Manifest, error) {
	m, _, err := Describe(ctx, ref, opts...)
	return m, err
}

// Describe is Inspect that also returns the digest of the manifest ref names, the one its
// signatures and attestations are attached to.
func Describe(ctx context.Context, ref string, opts ...Option) (*seed.Manifest, digest.Digest, error) {
	o := makeOptions(opts)
	src, loc, err := openRef(ctx, ref, o)
	if err != nil {
		return nil, "", err
	}
	defer src.close()
	rs, err := readSeed(ctx, src, loc)
	if err != nil {
		return nil, "", err
	}
	return rs.m, rs.desc.Digest, nil
}

// remoteSeed is a seed as a source holds it.
type remoteSeed struct {
	desc  ocispec.Descriptor // what the location names: a manifest, or an index (chunked)
	man   *ocispec.Manifest  // the manifest whose config is seed.json
	m     *seed.Manifest
	cfg   []byte
	delta *deltaSeed // a seed with a chunked disk; nil for one stored as files only
}

// readSeed resolves the seed at loc: its artifact descriptor and manifest, the seed
// manifest and the raw seed.json bytes.
func readSeed(ctx context.Context, src source, loc Location) (*remoteSeed, error) {
	desc, raw, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	rs := &remoteSeed{desc: desc}
	if manifestDescriptor(raw).MediaType == ocispec.MediaTypeImageIndex {
		if rs.delta, err = readParts(ctx, src, raw); err != nil {
			return nil, fmt.Errorf("%s: %w", loc, err)
		}
		rs.man = rs.delta.first
	} else if rs.man, err = parseSeedManifest(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	if rs.cfg, err = readBlob(ctx, src, rs.man.Config, maxMetadata); err != nil {
		return nil, fmt.Errorf("%s: the seed manifest: %w", loc, err)
	}
	if rs.m, err = seed.ParseManifest(rs.cfg, loc.String()); err != nil {
		return nil, err
	}
	if _, chunked := chunkedDisk(rs.m); chunked != (rs.delta != nil) {
		return nil, fmt.Errorf("%s: seed.json and the artifact's layout disagree on whether the disk is chunked", loc)
	}
	return rs, nil
}

// PartialPullError is a pull that stopped having kept the verified chunks it fetched in
// Dir, from which the same pull resumes. A caller that removes Dir reports Err alone, so
// the message never names a directory that is gone.
type PartialPullError struct {
	Err error
	Dir string
}

func (e *PartialPullError) Error() string {
	return fmt.Sprintf("%v (the chunks fetched so far are kept in %s: run the same command again to resume, or remove it)", e.Err, e.Dir)
}

func (e *PartialPullError) Unwrap() error { return e.Err }

// Pull fetches the seed at ref into dir (created if needed) and verifies it with
// seed.VerifyPulled (a chunked disk's chunks are each checked as they arrive; its raw
// digest is checked when it is written). Chunks are written at their offsets into files in a staging directory
// inside dir, each checked against its digest and recorded once synced, so a pull that
// is interrupted resumes with the chunks it has not finished. Only complete, verified
// chunks count; the files move into dir at the end.
func Pull(ctx context.Context, ref, dir string, opts ...Option) (*seed.Manifest, error) {
	o := makeOptions(opts)
	src, loc, err := openRef(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	rs, err := readSeed(ctx, src, loc)
	if err != nil {
		return nil, err
	}
	desc, m, cfg := rs.desc, rs.m, rs.cfg
	files, err := layoutFiles(rs.man, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	// A chunked disk's index is read and checked before anything is staged: a seed whose
	// index is unsound (a chunk id given two blobs) leaves nothing to resume from.
	var ix *stagedIndex
	if rs.delta != nil {
		if ix, err = fetchStagedIndex(ctx, src, rs.delta, m); err != nil {
			return nil, fmt.Errorf("%s: %w", loc, err)
		}
	}
	stage := filepath.Join(dir, stagingPrefix+desc.Digest.Encoded()[:16])
	if err := prepareStaging(dir, stage); err != nil {
		return nil, err
	}
	if err := fetchFiles(ctx, src, stage, files, o); err != nil {
		// Only chunks whose digest matched were kept: the same pull resumes from them.
		return nil, &PartialPullError{Err: err, Dir: stage}
	}
	moved := files
	if ix != nil {
		if err := pullPack(ctx, src, rs.delta, ix, stage, o); err != nil {
			return nil, &PartialPullError{Err: err, Dir: stage}
		}
		moved = append(moved, fileChunks{name: ix.disk.File}, fileChunks{name: ix.disk.Index.File})
	}
	// The seed is verified where it was staged, and its manifest goes into dir last: a pull
	// that fails or stops leaves nothing in dir that looks like a complete seed.
	if err := writeFileAtomic(filepath.Join(stage, seed.ManifestFile), cfg); err != nil {
		return nil, err
	}
	if err := seed.VerifyPulled(ctx, stage); err != nil {
		if ctx.Err() == nil {
			os.RemoveAll(stage)
		}
		return nil, fmt.Errorf("the pulled seed from %s: %w", loc, err)
	}
	os.Remove(filepath.Join(dir, seed.ManifestFile)) // an older seed's, now being replaced
	for _, f := range moved {
		if err := os.Rename(filepath.Join(stage, f.name), filepath.Join(dir, f.name)); err != nil {
			return nil, fmt.Errorf("pulling %s: %w", f.name, err)
		}
	}
	if err := os.Rename(filepath.Join(stage, seed.ManifestFile), filepath.Join(dir, seed.ManifestFile)); err != nil {
		return nil, fmt.Errorf("pulling %s: %w", seed.ManifestFile, err)
	}
	if err := os.RemoveAll(stage); err != nil {
		return nil, fmt.Errorf("removing the pull's staging directory: %w", err)
	}
	o.logger.InfoContext(ctx, "pulled seed", "from", loc.String(), "digest", desc.Digest, "to", dir)
	return m, nil
}

// stagedIndex is the checked chunk index of a seed's chunked disk, as read and decoded.
type stagedIndex struct {
	disk seed.Disk
	raw  []byte
	x    *diskpack.Index
}

// fetchStagedIndex reads and checks the chunk index of the chunked disk of m.
func fetchStagedIndex(ctx context.Context, src source, ds *deltaSeed, m *seed.Manifest) (*stagedIndex, error) {
	d, _ := chunkedDisk(m)
	b, x, err := ds.fetchIndex(ctx, src, d)
	if err != nil {
		return nil, err
	}
	return &stagedIndex{disk: d, raw: b, x: x}, nil
}

// pullPack stages the chunked disk of ix: its index, then its pack, from the staged chunks
// of an interrupted pull, from --from, and from the source, in that order of preference.
func pullPack(ctx context.Context, src source, ds *deltaSeed, ix *stagedIndex, stage string, o options) error {
	d, x := ix.disk, ix.x
	if err := writeFileAtomic(filepath.Join(stage, d.Index.File), ix.raw); err != nil {
		return err
	}
	var old *diskpack.Old
	var err error
	switch dir := filepath.Dir(stage); {
	case o.from != "":
		var done func()
		if old, done, err = openOld(ctx, o.from, x); err != nil {
			return err
		}
		defer done()
	case isChunkedSeed(dir):
		// Pulling into a directory that holds a seed already (an earlier version, or this
		// one from a pull that stopped after it finished): its chunks are reused, checked.
		if o2, done, err := openOld(ctx, dir, x); err == nil {
			old = o2
			defer done()
		}
	}
	var st PullStats
	err = fillPack(ctx, src, ds, x, filepath.Join(stage, d.File), old, o, &st)
	if o.stats != nil {
		*o.stats = st
	}
	o.logger.InfoContext(ctx, "pulled chunks", "fetched", st.Fetched, "fetched_bytes", st.FetchedBytes,
		"reused", st.Reused, "reused_bytes", st.ReusedBytes, "resumed", st.Resumed)
	return err
}

// isChunkedSeed tells whether dir holds a seed with a chunked disk.
func isChunkedSeed(dir string) bool {
	m, err := seed.ReadManifest(dir)
	if err != nil {
		return false
	}
	_, ok := chunkedDisk(m)
	return ok
}

// prepareStaging creates stage/done and drops the staging directories of other artifacts
// (an interrupted pull of a tag that has moved since).
func prepareStaging(dir, stage string) error {
	if err := os.MkdirAll(filepath.Join(stage, "done"), 0o755); err != nil {
		return fmt.Errorf("pulling into %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pulling into %s: %w", dir, err)
	}
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); strings.HasPrefix(e.Name(), stagingPrefix) && p != stage {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("removing an earlier pull's staging directory: %w", err)
			}
		}
	}
	return nil
}

// fetchFiles fetches every chunk not yet recorded as done, o.jobs at a time.
func fetchFiles(ctx context.Context, src source, stage string, files []fileChunks, o options) error {
	total := 0
	for _, f := range files {
		total += len(f.chunks)
	}
	p := &progress{f: o.progress, total: total}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	var opened []*os.File
	defer func() {
		for _, f := range opened {
			f.Close()
		}
	}()
	for _, fc := range files {
		// 0600: a seed's disk keeps the cluster's private keys, its credentials the rest.
		f, err := os.OpenFile(filepath.Join(stage, fc.name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("pulling %s: %w", fc.name, err)
		}
		opened = append(opened, f)
		if err := f.Truncate(fc.size); err != nil {
			return fmt.Errorf("pulling %s: %w", fc.name, err)
		}
		for i, d := range fc.chunks {
			c := pullChunk{file: f, name: fc.name, index: i, desc: d,
				marker: filepath.Join(stage, "done", fc.name+"."+strconv.Itoa(i))}
			g.Go(func() error {
				n, err := c.fetch(gctx, src)
				if err != nil {
					return err
				}
				p.add(blob{desc: d, what: c.String()}, n)
				return nil
			})
		}
	}
	return g.Wait()
}

type pullChunk struct {
	file   *os.File
	name   string
	index  int
	desc   ocispec.Descriptor
	marker string // exists, holding the digest, once the chunk is written and synced
}

func (c pullChunk) String() string { return fmt.Sprintf("%s chunk %d", c.name, c.index) }

// fetch writes the chunk at its offset unless its marker says an earlier pull did, and
// returns the bytes fetched.
func (c pullChunk) fetch(ctx context.Context, src source) (int64, error) {
	if b, err := os.ReadFile(c.marker); err == nil && digest.Digest(b) == c.desc.Digest {
		return 0, nil
	}
	off, err := strconv.ParseInt(c.desc.Annotations[AnnotationChunkOffset], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: bad offset annotation: %w", c, err)
	}
	var n int64
	// A chunk whose body breaks on the way is fetched again, whole: the same retry policy as
	// every request (netlimit); copy checks the digest of whichever try wrote it.
	err = netlimit.DefaultPolicy().Do(ctx, func() error {
		var err error
		n, err = c.copy(ctx, src, off)
		return err
	})
	if err != nil {
		return n, err
	}
	if err := c.file.Sync(); err != nil {
		return n, fmt.Errorf("%s: %w", c, err)
	}
	if err := os.WriteFile(c.marker, []byte(c.desc.Digest), 0o644); err != nil {
		return n, fmt.Errorf("%s: recording it done: %w", c, err)
	}
	return n, nil
}

// copy fetches the chunk and writes it at off, once, checking its digest and size.
func (c pullChunk) copy(ctx context.Context, src source, off int64) (int64, error) {
	rc, err := src.fetch(ctx, c.desc)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c, err)
	}
	defer rc.Close()
	dg := digest.SHA256.Digester()
	w := io.NewOffsetWriter(c.file, off)
	n, err := io.Copy(io.MultiWriter(w, dg.Hash()), ctxio.Reader(ctx, io.LimitReader(rc, c.desc.Size+1)))
	if err != nil {
		return n, fmt.Errorf("%s (%s, offset %d): %w", c, c.desc.Digest, off, err)
	}
	if got := dg.Digest(); got != c.desc.Digest || n != c.desc.Size {
		return n, &ChunkError{File: c.name, Index: c.index, Offset: off, Want: c.desc.Digest, Got: got, WantSize: c.desc.Size, GotSize: n}
	}
	return n, nil
}

// ChunkError says a chunk's content does not match its digest.
type ChunkError struct {
	File              string
	Index             int
	Offset            int64
	Want, Got         digest.Digest
	WantSize, GotSize int64
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("%s chunk %d (offset %d): the blob should be %s (%d bytes), its content is %s (%d bytes)",
		e.File, e.Index, e.Offset, e.Want, e.WantSize, e.Got, e.GotSize)
}

// Verify pulls the seed at ref into a temporary directory, which Pull checks chunk by chunk,
// then checks it whole with seed.Verify (every raw disk assembled and hashed), and removes
// it. The temporary directory is under $TMPDIR.
func Verify(ctx context.Context, ref string, opts ...Option) (*seed.Manifest, error) {
	tmp, err := os.MkdirTemp("", "snofactory-seed-verify-")
	if err != nil {
		return nil, fmt.Errorf("verifying %s: %w", ref, err)
	}
	m, err := Pull(ctx, ref, tmp, opts...)
	if pe, ok := errors.AsType[*PartialPullError](err); ok {
		err = pe.Err // tmp is removed below: the message must not say the chunks are kept there
	}
	if err == nil {
		err = seed.Verify(ctx, tmp)
	}
	return m, errors.Join(err, os.RemoveAll(tmp))
}
