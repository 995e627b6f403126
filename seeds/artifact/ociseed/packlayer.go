package ociseed

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// A registry spends a fixed time on every blob, so a seed pushed to a repository that
// holds none of its chunk groups goes as its pack, cut into a few pack blobs of at most
// diskpack.MaxPackBlob (bounded, so a push or pull stopped part way resumes at a pack blob, not at
// the start). Later seeds pushed to the repository
// point into that blob for the groups they share with it and send only their new groups,
// one blob each, so a z-stream or a one-file change sends what it sent before.
const (
	// MediaTypeDiskPack is a blob holding chunk groups of a pack, one after another.
	MediaTypeDiskPack = "application/vnd.snofactory.seed.disk.pack.v1+zstd"
	// AnnotationGroups on a pack layer lists the groups of this seed it holds, as
	// "HEX@AT" (the group's sha256 and its offset in the blob), comma-separated.
	AnnotationGroups = "io.snofactory.seed.groups"
	// heldWhat names a blob of chunk groups the repository holds already.
	heldWhat = "chunk groups the repository holds"
	// maxBaseSeeds bounds the seeds of the repository a push reads to find groups.
	maxBaseSeeds = 8
)

// groupPlace is where a chunk group's bytes are in the source: at in blob desc.
type groupPlace struct {
	desc ocispec.Descriptor
	at   int64
}

// encodeGroups is the AnnotationGroups value for groups gs, each at its offset at[i].
func encodeGroups(gs []diskpack.Group, at []int64) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.Digest.Encoded() + "@" + strconv.FormatInt(at[i], 10)
	}
	return strings.Join(parts, ",")
}

// decodeGroups reads the AnnotationGroups of pack layer l into places. The offsets are
// checked against the blob's size later, with each group's size from the index.
func decodeGroups(l ocispec.Descriptor, places map[digest.Digest]groupPlace) error {
	s := l.Annotations[AnnotationGroups]
	if s == "" {
		return fmt.Errorf("pack layer %s lists no chunk groups (annotation %s)", l.Digest, AnnotationGroups)
	}
	for _, e := range strings.Split(s, ",") {
		hex, atText, ok := strings.Cut(e, "@")
		d := digest.NewDigestFromEncoded(digest.SHA256, hex)
		at, err := strconv.ParseInt(atText, 10, 64)
		if !ok || err != nil || d.Validate() != nil || at < 0 || at >= l.Size {
			return fmt.Errorf("pack layer %s: %q is not HEX@OFFSET of a group inside the blob's %d bytes", l.Digest, e, l.Size)
		}
		places[d] = groupPlace{desc: l, at: at}
	}
	return nil
}

// knownGroups finds where the repository of r holds chunk groups already: in the seed its
// tag names now, then in up to maxBaseSeeds of its other tags. A seed that cannot be read
// is passed over: it costs only what it could have spared.
func (r *registry) knownGroups(ctx context.Context) map[digest.Digest]groupPlace {
	known := map[digest.Digest]groupPlace{}
	tags := []string{r.ref.Identifier()}
	if listed, err := r.tags(ctx); err == nil {
		tags = append(tags, listed...)
	}
	read := 0
	for i, tag := range tags {
		if read == maxBaseSeeds || (i > 0 && tag == tags[0]) {
			continue
		}
		read++
		base, err := newRegistry(Location{Transport: TransportRegistry, Ref: r.ref.Context().Tag(tag)}, r.o)
		if err != nil {
			continue
		}
		rs, err := readSeed(ctx, base, Location{Transport: TransportRegistry, Ref: base.ref})
		if err != nil || rs.delta == nil {
			continue
		}
		for g, p := range rs.delta.chunks {
			if _, ok := known[g]; !ok {
				known[g] = p
			}
		}
	}
	return known
}

// packLayers are the layers that hold the groups of x: on a registry (which charges per
// blob) the pack as its pack blobs (packs)
// when the repository holds none of them, else the blobs that hold groups already (held:
// nothing sent) and each new group as a blob of its own (send); elsewhere, with
// WithGroupBlobs, and for a disk whose chunks are not grouped (an index before version 3,
// or less data than diskpack groups: few blobs anyway), every group a blob.
func packLayers(ctx context.Context, t target, pack *os.File, x *diskpack.Index, d seed.Disk, o options) (held, send []blob, packs []diskpack.PackRange) {
	groups := x.Groups()
	r, isRegistry := t.(*registry)
	if !isRegistry || o.groupBlobs || x.Version < 3 || x.GroupChunks <= 1 {
		return nil, groupBlobs(t, pack, groups, x.Version, d.File), nil
	}
	reused, own, newGroups := placeGroups(groups, r.knownGroups(ctx))
	if len(newGroups) == len(groups) {
		return nil, nil, x.PackRanges()
	}
	for i, desc := range reused {
		held = append(held, blob{desc: desc, what: heldWhat, own: own[i]})
	}
	return held, groupBlobs(t, pack, newGroups, x.Version, d.File), nil
}

// placeGroups lists the blobs of known that hold groups (a pack blob annotated with the
// groups of this seed it holds, in pack order) with the bytes of those groups, and the
// groups known lacks.
func placeGroups(groups []diskpack.Group, known map[digest.Digest]groupPlace) (reused []ocispec.Descriptor, own []int64, newGroups []diskpack.Group) {
	type held struct {
		i  int // in reused
		gs []diskpack.Group
		at []int64
	}
	var holds []*held // beside reused: the groups of this seed a pack blob holds, or nil
	byBlob := map[digest.Digest]*held{}
	for _, g := range groups {
		p, ok := known[g.Digest]
		switch {
		case !ok:
			newGroups = append(newGroups, g)
		case p.desc.MediaType != MediaTypeDiskPack:
			reused, holds, own = append(reused, p.desc), append(holds, nil), append(own, g.Size)
		default:
			h := byBlob[p.desc.Digest]
			if h == nil {
				h = &held{i: len(reused)}
				byBlob[p.desc.Digest] = h
				reused, holds = append(reused, ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: p.desc.Digest, Size: p.desc.Size}), append(holds, h)
				own = append(own, 0)
			}
			own[h.i] += g.Size
			h.gs, h.at = append(h.gs, g), append(h.at, p.at)
		}
	}
	for i, h := range holds {
		if h != nil {
			reused[i].Annotations = map[string]string{AnnotationGroups: encodeGroups(h.gs, h.at)}
		}
	}
	return reused, own, newGroups
}

// tags lists the tags of r's repository.
func (r *registry) tags(ctx context.Context) ([]string, error) {
	return remote.List(r.ref.Context(), append(r.opts, remote.WithContext(ctx))...)
}

// maxUnit bounds the bytes of a pack blob one request of a pull reads: a pack is read in
// runs of this size, several at once.
const maxUnit = 64 << 20

// fillUnits places every group of x in the source and joins the groups that lie one after
// another in one blob into runs of at most maxUnit bytes, each fetched as one: a seed
// pushed as its pack is read in a few large requests. Each unit is a diskpack.Group whose
// Blobs are At their offsets in the unit's blob. An offset from the source is believed
// only inside the blob's size.
func fillUnits(groups []diskpack.Group, places map[digest.Digest]groupPlace) ([]diskpack.Group, []ocispec.Descriptor, error) {
	var units []diskpack.Group
	var descs []ocispec.Descriptor
	end := int64(-1)
	for _, g := range groups {
		p, ok := places[g.Digest]
		if !ok {
			return nil, nil, fmt.Errorf("chunk group %s (at %d in the pack) is not a layer of the seed", g.Digest, g.Offset)
		}
		if p.at < 0 || p.at > p.desc.Size-g.Size || (p.desc.MediaType != MediaTypeDiskPack && p.desc.Size != g.Size) {
			return nil, nil, fmt.Errorf("chunk group %s (%d bytes) at %d does not lie inside blob %s (%d bytes)", g.Digest, g.Size, p.at, p.desc.Digest, p.desc.Size)
		}
		n := len(units)
		if n == 0 || descs[n-1].Digest != p.desc.Digest || end != p.at || units[n-1].Size+g.Size > maxUnit {
			units = append(units, diskpack.Group{Digest: p.desc.Digest, Offset: p.at})
			descs = append(descs, p.desc)
			n++
		}
		u := &units[n-1]
		for _, b := range g.Blobs {
			b.At += p.at
			u.Blobs = append(u.Blobs, b)
		}
		u.Size += g.Size
		end = p.at + g.Size
	}
	return units, descs, nil
}
