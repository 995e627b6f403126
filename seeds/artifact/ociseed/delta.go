package ociseed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// A seed with a chunked disk is stored as an image index of artifact manifests, so that
// every chunk group (diskpack.Group: consecutive chunks of the pack; one chunk in an index
// before version 3) is a registry blob of its own, deduplicated by digest, and no manifest
// grows past what registries accept however many chunks the disk has:
//
//   - the index (artifactType seed.ArtifactType) is what the tag names and what a
//     signature or a referrer points at;
//   - its first manifest has the seed manifest (seed.json) as config, and as layers the
//     disk's chunk index, the seed's other files cut into chunks as before, then groups;
//   - further manifests (empty config) carry the remaining groups.
//
// Each manifest lists at most MaxLayersPerManifest layers, about 150 KiB of JSON: distribution
// and quay accept manifests of 4 MiB, so a 120 GiB disk with 200,000 chunks needs 200
// manifests of well under that.
const (
	MediaTypeDiskIndex  = "application/vnd.snofactory.seed.disk.index.v1+json"
	MediaTypeDiskChunk2 = "application/vnd.snofactory.seed.disk.chunk.v2+zstd"
	// MediaTypeDiskGroup is a group of consecutive chunks (an index of version 3 on):
	// their zstd frames one after another, which is a zstd stream too.
	MediaTypeDiskGroup   = "application/vnd.snofactory.seed.disk.group.v1+zstd"
	ArtifactTypePart     = "application/vnd.snofactory.seed.part.v1"
	MaxLayersPerManifest = 1000
	// maxParts bounds the manifests a pull reads: 2,000 parts are 2 million chunks.
	maxParts = 2000
)

// chunkedDisk returns the seed's chunked disk, if it has one.
func chunkedDisk(m *seed.Manifest) (seed.Disk, bool) {
	for _, d := range m.Disks {
		if d.Format == seed.FormatChunked {
			return d, true
		}
	}
	return seed.Disk{}, false
}

// openPack opens a seed's pack as data: never through a symlink, only a regular file of
// the declared size (seed.Check has said so; this guards against a swap since).
func openPack(dir string, d seed.Disk) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, d.File), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", d.File, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != d.Size {
		f.Close()
		return nil, &seed.BadSeedError{File: d.File, Problem: "is not the regular file of the size the manifest says"}
	}
	return f, nil
}

// verifyingReader fails at the end of a blob whose bytes are not its digest, before a
// target can take it.
type verifyingReader struct {
	r    io.Reader
	dg   digest.Digester
	want ocispec.Descriptor
	what string
	n    int64
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.dg.Hash().Write(p[:n])
	v.n += int64(n)
	if err == io.EOF && (v.dg.Digest() != v.want.Digest || v.n != v.want.Size) {
		return n, fmt.Errorf("%s: the seed's pack holds %s (%d bytes) where the index says %s: the seed changed since it was sealed; run seed verify",
			v.what, v.dg.Digest(), v.n, v.want.Digest)
	}
	return n, err
}

// pushDelta stores a seed with a chunked disk at t and returns the top index. Chunks the
// target has already are neither read nor sent: an unchanged seed costs one manifest check.
func pushDelta(ctx context.Context, t target, dir string, m *seed.Manifest, d seed.Disk, cfg []byte, o options, p *progress) ([]byte, error) {
	x, err := seed.ReadIndex(dir, d)
	if err != nil {
		return nil, err
	}
	idxBytes, err := x.Marshal()
	if err != nil {
		return nil, err
	}
	if digest.FromBytes(idxBytes) != d.Index.Digest {
		// Not our encoding: send the file as it is.
		if idxBytes, err = os.ReadFile(filepath.Join(dir, d.Index.File)); err != nil {
			return nil, err
		}
	}
	pack, err := openPack(dir, d)
	if err != nil {
		return nil, err
	}
	defer pack.Close()
	// The seed's other files (a qcow2 form, credentials) go as fixed-size chunks, as ever.
	var others []chunk
	for _, c := range chunks(dir, m, o.chunkSize) {
		if c.file != d.File {
			others = append(others, c)
		}
	}
	index := bytesBlob(MediaTypeDiskIndex, idxBytes, d.Index.File)
	index.desc.Annotations = map[string]string{ocispec.AnnotationTitle: d.Index.File}
	store := []blob{index}
	if err := hashChunks(ctx, others, func(_ int, b blob) error { store = append(store, b); return nil }); err != nil {
		return nil, err
	}
	held, send, ranges := packLayers(ctx, t, pack, x, d, o)
	store = append(store, send...)
	config := bytesBlob(seed.MediaTypeManifest, cfg, seed.ManifestFile)
	empty := bytesBlob(ocispec.MediaTypeEmptyJSON, []byte("{}"), "empty config")
	extra := []blob{config}
	if len(store)+len(held)+len(ranges) > MaxLayersPerManifest {
		extra = append(extra, empty)
	}
	p.total = len(store) + len(held) + len(ranges) + len(extra)
	for _, b := range held {
		p.add(b, 0) // the repository holds it already: nothing to ask for
	}
	var parts [][]byte
	var top []byte
	if len(ranges) > 0 {
		// The pack blobs' digests are known only once they are read: the manifests follow.
		packs, err := putWithPacks(ctx, t, append(store, extra...), pack, ranges, d, o, p)
		if err != nil {
			return nil, err
		}
		if parts, top, err = deltaManifests(m, x, config, empty, append(store, packs...), o); err != nil {
			return nil, err
		}
	} else if parts, top, err = sendDelta(ctx, t, m, x, config, empty, append(store, held...), extra, o, p); err != nil || parts == nil {
		return top, err
	}
	for _, raw := range parts {
		if err := t.putManifest(ctx, raw, false); err != nil {
			return nil, err
		}
	}
	return top, t.putManifest(ctx, top, true)
}

// sendDelta sends the blobs of layers (but those held) and extra, and returns the
// manifests that name layers; nil parts when the target has the whole seed already (its
// top index, which it accepted only with every manifest and blob it names): then only the
// tag was put, and nothing read or sent.
func sendDelta(ctx context.Context, t target, m *seed.Manifest, x *diskpack.Index, config, empty blob, layers, extra []blob, o options, p *progress) ([][]byte, []byte, error) {
	parts, top, err := deltaManifests(m, x, config, empty, layers, o)
	if err != nil {
		return nil, nil, err
	}
	var send []blob
	for _, b := range layers {
		if b.what != heldWhat {
			send = append(send, b)
		}
	}
	if has, err := t.hasManifest(ctx, digest.FromBytes(top)); err == nil && has {
		for _, b := range append(send, extra...) {
			p.add(b, 0)
		}
		return nil, top, t.putManifest(ctx, top, true)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	for _, b := range append(send, extra...) {
		g.Go(func() error { return putBlob(gctx, t, b, p) })
	}
	return parts, top, g.Wait()
}

// groupBlobs are the chunk groups of x, each one blob: the bytes of pack from its first
// chunk to its last, checked against its digest as read unless t checks them itself.
func groupBlobs(t target, pack *os.File, groups []diskpack.Group, version int, file string) []blob {
	mediaType, kind := MediaTypeDiskChunk2, "chunk"
	if version >= 3 {
		mediaType, kind = MediaTypeDiskGroup, "chunk group"
	}
	var out []blob
	for _, g := range groups {
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: g.Digest, Size: g.Size}
		what := fmt.Sprintf("%s %s %s", file, kind, g.Digest.Encoded()[:12])
		out = append(out, blob{desc: desc, what: what, open: func() (io.ReadCloser, error) {
			r := io.NewSectionReader(pack, g.Offset, g.Size)
			if t.checksDigests() {
				return io.NopCloser(r), nil
			}
			return io.NopCloser(&verifyingReader{r: r, dg: digest.SHA256.Digester(), want: desc, what: what}), nil
		}})
	}
	return out
}

// deltaManifests lays the layers out in manifests of at most MaxLayersPerManifest, the
// first with seed.json as its config, and returns them and the index naming them.
func deltaManifests(m *seed.Manifest, x *diskpack.Index, config, empty blob, layers []blob, o options) ([][]byte, []byte, error) {
	var parts [][]byte
	var descs []ocispec.Descriptor
	for i := 0; i == 0 || len(layers) > 0; i++ {
		n := min(len(layers), MaxLayersPerManifest)
		man := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			ArtifactType: ArtifactTypePart, Config: config.desc,
			Annotations: map[string]string{AnnotationPart: strconv.Itoa(i)}}
		if i > 0 {
			man.Config = empty.desc
		}
		for _, l := range layers[:n] {
			man.Layers = append(man.Layers, l.desc)
		}
		layers = layers[n:]
		raw, err := json.Marshal(man)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the seed's OCI manifest: %w", err)
		}
		parts = append(parts, raw)
		descs = append(descs, manifestDescriptor(raw))
	}
	top := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		ArtifactType: seed.ArtifactType, Manifests: descs, Annotations: seedAnnotations(m, o)}
	top.Annotations[AnnotationChunkSize] = strconv.FormatInt(x.Params.Avg, 10)
	raw, err := json.Marshal(top)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the seed's OCI index: %w", err)
	}
	return parts, raw, nil
}

// AnnotationPart numbers the manifests of a chunked seed, from 0.
const AnnotationPart = "io.snofactory.seed.part"

// deltaSeed is a chunked seed as read from a source.
type deltaSeed struct {
	first  *ocispec.Manifest            // with seed.json as config
	chunks map[digest.Digest]groupPlace // where each chunk group is: a blob, and where in it
}

// readParts reads every manifest of a chunked seed's index top.
func readParts(ctx context.Context, src source, top []byte) (*deltaSeed, error) {
	var idx ocispec.Index
	if err := strictjson.DecodeOpen(top, &idx); err != nil {
		return nil, fmt.Errorf("decoding the OCI index: %w", err)
	}
	if idx.ArtifactType != seed.ArtifactType || len(idx.Manifests) == 0 || len(idx.Manifests) > maxParts {
		return nil, fmt.Errorf("not a seed: an index of artifactType %q with %d manifests", idx.ArtifactType, len(idx.Manifests))
	}
	ds := &deltaSeed{chunks: map[digest.Digest]groupPlace{}}
	for i, d := range idx.Manifests {
		if d.MediaType != ocispec.MediaTypeImageManifest || d.ArtifactType != ArtifactTypePart {
			return nil, fmt.Errorf("not a seed: manifest %d of the index is %s of artifactType %q", i, d.MediaType, d.ArtifactType)
		}
		raw, err := src.manifest(ctx, d)
		if err != nil {
			return nil, err
		}
		var man ocispec.Manifest
		if err := strictjson.DecodeOpen(raw, &man); err != nil {
			return nil, fmt.Errorf("decoding manifest %s: %w", d.Digest, err)
		}
		if i == 0 {
			if man.Config.MediaType != seed.MediaTypeManifest {
				return nil, fmt.Errorf("not a seed: the first manifest's config is %q, not %q", man.Config.MediaType, seed.MediaTypeManifest)
			}
			ds.first = &man
		}
		for _, l := range man.Layers {
			switch l.MediaType {
			case MediaTypeDiskChunk2, MediaTypeDiskGroup:
				ds.chunks[l.Digest] = groupPlace{desc: l}
			case MediaTypeDiskPack:
				if err := decodeGroups(l, ds.chunks); err != nil {
					return nil, err
				}
			}
		}
	}
	return ds, nil
}

// fetchIndex reads the chunk index of the seed's chunked disk d from the source, checked
// against seed.json.
func (ds *deltaSeed) fetchIndex(ctx context.Context, src source, d seed.Disk) ([]byte, *diskpack.Index, error) {
	for _, l := range ds.first.Layers {
		if l.MediaType != MediaTypeDiskIndex {
			continue
		}
		if l.Digest != d.Index.Digest || l.Size != d.Index.Size {
			return nil, nil, fmt.Errorf("the chunk index layer is %s (%d bytes), seed.json says %s (%d bytes)", l.Digest, l.Size, d.Index.Digest, d.Index.Size)
		}
		b, err := readBlob(ctx, src, l, diskpack.MaxIndexSize)
		if err != nil {
			return nil, nil, err
		}
		x, err := seed.CheckIndex(b, d)
		return b, x, err
	}
	return nil, nil, errors.New("the seed has no chunk index layer")
}

// openOldRaw opens the raw disk --from names: a regular file or a block device. O_NONBLOCK
// keeps a FIFO from blocking the open; it and a character device (/dev/zero would be read
// without end) are refused by their type, as the user's input.
func openOldRaw(from string) (*os.File, error) {
	f, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, badinput.Errorf("--from: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--from: %w", err)
	}
	if m := fi.Mode(); !m.IsRegular() && (m&os.ModeDevice == 0 || m&os.ModeCharDevice != 0) {
		f.Close()
		return nil, badinput.Errorf("--from %s: not a seed directory, a regular file or a block device", from)
	}
	return f, nil
}

// openOld opens what --from names: a seed directory with a chunked disk, or any raw disk
// (a file, or the device about to be rewritten), chunked as x's parameters say.
func openOld(ctx context.Context, from string, x *diskpack.Index) (*diskpack.Old, func(), error) {
	fi, err := os.Stat(from)
	if err != nil {
		return nil, nil, fmt.Errorf("--from: %w", err)
	}
	if fi.IsDir() {
		m, err := seed.Check(from)
		if err != nil {
			return nil, nil, fmt.Errorf("--from %s: %w", from, err)
		}
		d, ok := chunkedDisk(m)
		if !ok {
			return nil, nil, fmt.Errorf("--from %s: the seed has no chunked disk to reuse chunks from (seeds sealed before schemaVersion 2 have none: pass its raw disk or the device it was written to instead)", from)
		}
		ox, err := seed.ReadIndex(from, d)
		if err != nil {
			return nil, nil, fmt.Errorf("--from %s: %w", from, err)
		}
		f, err := openPack(from, d)
		if err != nil {
			return nil, nil, fmt.Errorf("--from %s: %w", from, err)
		}
		old, err := diskpack.OldPack(f, ox, "the earlier seed "+from)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return old, func() { old.Close(); f.Close() }, nil
	}
	f, err := openOldRaw(from)
	if err != nil {
		return nil, nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("--from %s: %w", from, err)
	}
	old, err := diskpack.OldRaw(ctx, f, min(size, x.Size), x.Params, from)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return old, func() { old.Close(); f.Close() }, nil
}

// PullStats says where a pull's chunks came from.
type PullStats struct {
	Fetched, FetchedBytes int64 // chunks and bytes read from the source
	Reused, ReusedBytes   int64 // from --from
	Resumed, ResumedBytes int64 // already staged by an interrupted pull
	// Requests is the blob GETs made, Ranges those of them that asked for part of a
	// chunk group (the chunks a pull lacked of it).
	Requests, Ranges int64
}

// fillPack writes every chunk of x into the staged pack: those an interrupted pull staged
// already are kept (their bytes checked), those old has are taken from it, the rest are
// fetched: a whole group in one request when none of its chunks is at hand, else each run
// of missing chunks by a range request on the group's blob. Every chunk's bytes are checked
// against the index before they count.
func fillPack(ctx context.Context, src source, ds *deltaSeed, x *diskpack.Index, path string, old *diskpack.Old, o options, st *PullStats) error {
	units, descs, err := fillUnits(x.Groups(), ds.chunks)
	if err != nil {
		return err
	}
	blobs, size := x.Blobs()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	pf := &packFiller{src: src, ds: ds, f: f, old: old, o: o, resuming: fi.Size() == size, firstUse: firstUses(x),
		p: &progress{f: o.progress, total: len(blobs)}}
	if err := f.Truncate(size); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	for i, u := range units {
		g.Go(func() error { return pf.fillGroup(gctx, u, descs[i]) })
	}
	err = g.Wait()
	*st = PullStats{Fetched: pf.fetched.Load(), FetchedBytes: pf.fetchedBytes.Load(), Reused: pf.reused.Load(),
		ReusedBytes: pf.reusedBytes.Load(), Resumed: pf.resumed.Load(), ResumedBytes: pf.resumedBytes.Load(),
		Requests: pf.requests.Load(), Ranges: pf.ranges.Load()}
	if err != nil {
		return err
	}
	return f.Sync()
}

// uncheckedSource is a source that can skip its own check of a blob's digest
// (go-containerregistry's sha256), for a reader that checks the bytes another way.
type uncheckedSource interface {
	fetchUnchecked(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error)
}

// damagedChunk is a chunk a source served with the wrong bytes on every try: the seed
// there is damaged, a bad seed rather than a failed transfer.
type damagedChunk struct{ *diskpack.ChunkError }

func (e damagedChunk) Error() string {
	return e.ChunkError.Error() + " (the source's copy of the seed is damaged: push it again from a copy that seed verify accepts)"
}

func (e damagedChunk) Unwrap() []error { return []error{e.ChunkError, seed.ErrBadSeed} }

// DiskIndex returns the seed manifest and the chunk index of the chunked seed at ref,
// reading only manifests and the index.
func DiskIndex(ctx context.Context, ref string, opts ...Option) (*seed.Manifest, *diskpack.Index, error) {
	o := makeOptions(opts)
	src, loc, err := openRef(ctx, ref, o)
	if err != nil {
		return nil, nil, err
	}
	defer src.close()
	rs, err := readSeed(ctx, src, loc)
	if err != nil {
		return nil, nil, err
	}
	d, ok := chunkedDisk(rs.m)
	if !ok {
		return rs.m, nil, fmt.Errorf("%s has no chunked disk (sealed before schemaVersion 2, or without the chunked format)", loc)
	}
	_, x, err := rs.delta.fetchIndex(ctx, src, d)
	return rs.m, x, err
}
