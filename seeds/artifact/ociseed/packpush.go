package ociseed

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// packBlob is range r of pack as the blob a push sends to a registry (packLayers). The
// seal recorded its digest (an index of version 4), and the registry hashes what it
// receives and refuses other bytes (checksDigests) as it does a group blob, so the pack is
// not read before it is sent: a push hashes nothing. A range without a digest (a version 3
// index) is hashed first (hashPackRange).
func packBlob(ctx context.Context, pack *os.File, r diskpack.PackRange, d seed.Disk) (blob, error) {
	if r.Digest == "" {
		return hashPackRange(ctx, pack, r, d)
	}
	return blob{desc: packDescriptor(r, r.Digest), what: packWhat(d, r), open: func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(pack, r.Offset, r.Size)), nil
	}}, nil
}

// packWhat names pack blob r in progress and errors.
func packWhat(d seed.Disk, r diskpack.PackRange) string {
	return fmt.Sprintf("%s pack blob at %d", d.File, r.Offset)
}

// packDescriptor describes range r of the pack as a pack blob of digest d, annotated with
// the groups it holds.
func packDescriptor(r diskpack.PackRange, d digest.Digest) ocispec.Descriptor {
	at := make([]int64, len(r.Groups))
	for i, g := range r.Groups {
		at[i] = g.Offset - r.Offset
	}
	return ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: d, Size: r.Size,
		Annotations: map[string]string{AnnotationGroups: encodeGroups(r.Groups, at)}}
}

// hashPackRange reads range r of pack once, hashing the pack blob it becomes and every
// group in it: a group whose bytes are not the index's digest means the seed changed since
// it was sealed, which the registry cannot see as it checks only the new blob's digest.
func hashPackRange(ctx context.Context, pack *os.File, r diskpack.PackRange, d seed.Disk) (blob, error) {
	whole := sha256.New()
	for _, g := range r.Groups {
		if err := ctx.Err(); err != nil {
			return blob{}, err
		}
		dg := digest.SHA256.Digester()
		if _, err := io.Copy(io.MultiWriter(whole, dg.Hash()), io.NewSectionReader(pack, g.Offset, g.Size)); err != nil {
			return blob{}, fmt.Errorf("reading the seed's %s: %w", d.File, err)
		}
		if dg.Digest() != g.Digest {
			return blob{}, fmt.Errorf("%s: %w: the chunk group at %d holds %s where the index says %s, so the seed changed since it was sealed; run seed verify",
				d.File, seed.ErrBadSeed, g.Offset, dg.Digest(), g.Digest)
		}
	}
	desc := packDescriptor(r, digest.NewDigest(digest.SHA256, whole))
	return blob{desc: desc, what: packWhat(d, r), open: func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(pack, r.Offset, r.Size)), nil
	}}, nil
}

// putWithPacks uploads blobs and the pack blobs of ranges, o.jobs at a time, and returns
// the pack blobs. A pack blob the index gives no digest for is hashed here, in order,
// while those before it upload; each upload asks the registry to mount the blob first, so
// a push run again after a kill sends only the pack blobs it lacks.
func putWithPacks(ctx context.Context, t target, blobs []blob, pack *os.File, ranges []diskpack.PackRange, d seed.Disk, o options, p *progress) ([]blob, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	for _, b := range blobs {
		g.Go(func() error { return putBlob(gctx, t, b, p) })
	}
	packs := make([]blob, len(ranges))
	var hashErr error
	for i, r := range ranges {
		if packs[i], hashErr = packBlob(gctx, pack, r, d); hashErr != nil {
			break
		}
		b := packs[i]
		g.Go(func() error { return putBlob(gctx, t, b, p) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if hashErr != nil {
		return nil, hashErr
	}
	return packs, nil
}
