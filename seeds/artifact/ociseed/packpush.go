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

// MaxPackBlob bounds a pack blob: a push killed part way sends again at most the pack
// blobs that had not finished (a registry keeps only whole blobs), and a pull fetches each
// in one GET. At 32 MiB the 2 GiB bench disk's 490 MiB pack is under 20 blobs, so the
// registry's fixed cost per blob (a few ms) is lost in the transfer, and a kill costs at
// most the DefaultJobs in flight.
const MaxPackBlob = 32 << 20

// PackRange is a run of consecutive chunk groups of a pack sent as one pack blob.
type PackRange struct {
	Offset, Size int64 // in the pack
	Groups       []diskpack.Group
}

// PackRanges cuts groups (in pack order, tiling it, as diskpack.Index.Groups gives them)
// into the pack blobs a push sends: each ends at a group boundary and holds at most
// MaxPackBlob bytes, or one group where a group alone is larger.
func PackRanges(groups []diskpack.Group) []PackRange {
	var out []PackRange
	for _, g := range groups {
		n := len(out)
		if n == 0 || out[n-1].Offset+out[n-1].Size != g.Offset || out[n-1].Size+g.Size > MaxPackBlob {
			out = append(out, PackRange{Offset: g.Offset})
			n++
		}
		out[n-1].Size += g.Size
		out[n-1].Groups = append(out[n-1].Groups, g)
	}
	return out
}

// hashPackRange reads range r of pack once, hashing the pack blob it becomes and every
// group in it: a group whose bytes are not the index's digest means the seed changed since
// it was sealed, which the registry cannot see as it checks only the new blob's digest.
func hashPackRange(ctx context.Context, pack *os.File, r PackRange, d seed.Disk) (blob, error) {
	whole := sha256.New()
	at := make([]int64, len(r.Groups))
	for i, g := range r.Groups {
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
		at[i] = g.Offset - r.Offset
	}
	desc := ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: digest.NewDigest(digest.SHA256, whole), Size: r.Size,
		Annotations: map[string]string{AnnotationGroups: encodeGroups(r.Groups, at)}}
	what := fmt.Sprintf("%s pack blob at %d", d.File, r.Offset)
	return blob{desc: desc, what: what, open: func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(pack, r.Offset, r.Size)), nil
	}}, nil
}

// putWithPacks uploads blobs and the pack blobs of ranges, o.jobs at a time, and returns
// the pack blobs. Each pack blob is hashed here, in order, while those before it upload,
// so hashing adds little to the push; each upload asks the registry to mount the blob
// first, so a push run again after a kill sends only the pack blobs it lacks.
func putWithPacks(ctx context.Context, t target, blobs []blob, pack *os.File, ranges []PackRange, d seed.Disk, o options, p *progress) ([]blob, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.jobs)
	for _, b := range blobs {
		g.Go(func() error { return putBlob(gctx, t, b, p) })
	}
	packs := make([]blob, len(ranges))
	var hashErr error
	for i, r := range ranges {
		if packs[i], hashErr = hashPackRange(gctx, pack, r, d); hashErr != nil {
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
