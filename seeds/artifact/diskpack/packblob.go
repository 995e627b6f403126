package diskpack

import (
	"fmt"
	"hash"

	"github.com/opencontainers/go-digest"
)

// MaxPackBlob bounds a pack blob this package cuts: a push killed part way sends again at
// most the pack blobs that had not finished (a registry keeps only whole blobs), and a pull
// fetches each in one GET. At 32 MiB the 2 GiB bench disk's 490 MiB pack is under 20
// blobs, so the registry's fixed cost per blob (a few ms) is lost in the transfer.
const MaxPackBlob = 32 << 20

// PackBlob is a run of consecutive chunk groups of the pack that a push sends as one
// registry blob when the repository holds none of the seed's groups. The seal records
// each one's digest (index version 4 on) so that a push names it without reading the
// pack first; the registry hashes what it receives and refuses other bytes.
type PackBlob struct {
	Offset int64         `json:"offset"` // in the pack
	Size   int64         `json:"size"`
	Digest digest.Digest `json:"digest"` // sha256 of its bytes
}

// PackRange is a pack blob with the groups it holds.
type PackRange struct {
	PackBlob
	Groups []Group
}

// cutPackRanges cuts groups (in pack order, tiling it, as Index.Groups gives them) into
// pack blobs: each ends at a group boundary and holds at most MaxPackBlob bytes, or one
// group where a group alone is larger. Their digests are left empty.
func cutPackRanges(groups []Group) []PackRange {
	var out []PackRange
	for _, g := range groups {
		n := len(out)
		if n == 0 || out[n-1].Offset+out[n-1].Size != g.Offset || out[n-1].Size+g.Size > MaxPackBlob {
			out = append(out, PackRange{PackBlob: PackBlob{Offset: g.Offset}})
			n++
		}
		out[n-1].Size += g.Size
		out[n-1].Groups = append(out[n-1].Groups, g)
	}
	return out
}

// PackRanges are the pack blobs of the pack with their groups: those the index records
// (version 4, a grouped disk), else cut by cutPackRanges with no digest, which a push
// must then hash.
func (x *Index) PackRanges() []PackRange {
	groups := x.Groups()
	if len(x.PackBlobs) == 0 {
		return cutPackRanges(groups)
	}
	out := make([]PackRange, 0, len(x.PackBlobs))
	i := 0
	for _, b := range x.PackBlobs {
		r := PackRange{PackBlob: b}
		for ; i < len(groups) && groups[i].Offset < b.Offset+b.Size; i++ {
			r.Groups = append(r.Groups, groups[i])
		}
		out = append(out, r)
	}
	return out
}

// validatePackBlobs checks the recorded pack blobs of a version 4 index against groups,
// which tile the pack (validateGroups): only a grouped disk has them, and then they tile
// the pack too, each beginning and ending at a group boundary, at most MaxPackBlob bytes
// unless it holds a single group, and named by a sha256 digest. Validate refuses them in
// an older index.
func (x *Index) validatePackBlobs(groups []Group) []error {
	switch {
	case x.Version < 4:
		return nil
	case x.GroupChunks <= 1 && len(x.PackBlobs) > 0:
		return []error{fmt.Errorf("packBlobs: a disk whose chunks are not grouped (groupChunks %d) has none", x.GroupChunks)}
	case x.GroupChunks <= 1:
		return nil
	case len(x.PackBlobs) == 0 || len(x.PackBlobs) > len(groups):
		return []error{fmt.Errorf("packBlobs: %d listed for %d chunk groups: want 1 to %d", len(x.PackBlobs), len(groups), len(groups))}
	}
	var errs []error
	i := 0
	for j, b := range x.PackBlobs {
		if len(errs) > 20 {
			return append(errs, fmt.Errorf("and more"))
		}
		if !sha256Digest(b.Digest) {
			errs = append(errs, fmt.Errorf("packBlobs[%d]: digest %q is not a sha256 digest", j, b.Digest))
		}
		if i == len(groups) || groups[i].Offset != b.Offset {
			errs = append(errs, fmt.Errorf("packBlobs[%d]: offset %d is not where the next chunk group begins", j, b.Offset))
			break
		}
		var size int64
		n := 0
		for ; i < len(groups) && size < b.Size; i++ {
			size += groups[i].Size
			n++
		}
		switch {
		case b.Size <= 0:
			errs = append(errs, fmt.Errorf("packBlobs[%d]: size %d is not positive", j, b.Size))
		case size != b.Size:
			errs = append(errs, fmt.Errorf("packBlobs[%d]: size %d does not end at a chunk group's end (%d)", j, b.Size, size))
		case b.Size > MaxPackBlob && n > 1:
			errs = append(errs, fmt.Errorf("packBlobs[%d]: %d bytes in %d chunk groups, more than the %d a pack blob of several groups may hold", j, b.Size, n, MaxPackBlob))
		}
		if b.Size <= 0 || size != b.Size {
			break
		}
	}
	if len(errs) == 0 && i != len(groups) {
		errs = append(errs, fmt.Errorf("packBlobs: they end at chunk group %d of %d, not at the pack's end", i, len(groups)))
	}
	return errs
}

// packCutter records the pack blobs of a pack being written, from its groups as they
// close, hashing each pack blob as it goes: the bytes of the open group are hashed into the
// open pack blob too (unless the group is the pack's first), in case the group turns out
// to fit; one that does not starts the next pack blob, whose hash is then the group's own.
type packCutter struct {
	h      hash.Hash // the open pack blob's, with the open group's bytes; nil before the first group closes
	before hash.Hash // h as it was when the open group began
	off    int64     // of the open pack blob in the pack
	size   int64     // of the open pack blob, without the open group
	blobs  []PackBlob
}

// groupBegins is called before the first bytes of each group.
func (p *packCutter) groupBegins() error {
	if p.h == nil {
		return nil
	}
	var err error
	p.before, err = cloneHash(p.h)
	return err
}

// write adds bytes of the open group.
func (p *packCutter) write(b []byte) {
	if p.h != nil {
		p.h.Write(b)
	}
}

// groupEnds closes the open group of size bytes, whose own sha256 is group.
func (p *packCutter) groupEnds(group hash.Hash, size int64) error {
	if p.h != nil && p.size+size <= MaxPackBlob {
		p.size += size
		return nil
	}
	if p.h != nil {
		p.blobs = append(p.blobs, PackBlob{Offset: p.off, Size: p.size, Digest: digest.NewDigest(digest.SHA256, p.before)})
		p.off += p.size
	}
	var err error
	p.h, err = cloneHash(group)
	p.size = size
	return err
}

// close ends the open pack blob and returns them all.
func (p *packCutter) close() []PackBlob {
	if p.h != nil && p.size > 0 {
		p.blobs = append(p.blobs, PackBlob{Offset: p.off, Size: p.size, Digest: digest.NewDigest(digest.SHA256, p.h)})
		p.h = nil
	}
	return p.blobs
}

func cloneHash(h hash.Hash) (hash.Hash, error) {
	c, ok := h.(hash.Cloner)
	if !ok {
		return nil, fmt.Errorf("hash %T cannot be cloned", h)
	}
	return c.Clone()
}
