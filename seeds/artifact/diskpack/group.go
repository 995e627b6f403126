package diskpack

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/opencontainers/go-digest"
)

// Chunks are stored in groups: a run of consecutive distinct chunks of the pack, which a
// registry stores as one blob (the concatenation of their zstd frames, itself a zstd
// stream). A registry spends a fixed time on every blob whatever its size, so a seed of
// thousands of chunks pushes faster as a few hundred groups. A group ends after a chunk
// whose raw digest says so (EndsGroup), not after a count: an inserted or changed chunk
// changes only its own group, and the groups after it cut where they did before, so a
// rebuild still shares all but the groups its changes touch.
const (
	// groupMeanRaw is the most raw bytes a group holds on average (GroupChunksFor).
	groupMeanRaw = 2 << 20
	// minGroupedData is the least data a disk holds for its chunks to be grouped.
	minGroupedData = 512 << 20
	// MaxGroupSize bounds a group's stored bytes, whoever wrote the index: what a reader
	// of a registry that ignores a range request reads and discards at most.
	MaxGroupSize = 64 << 20
	// MaxGroupChunkCount bounds the chunks of a group, whoever wrote the index.
	MaxGroupChunkCount = 1024
	// groupCutSize ends a group this package writes once it holds this many stored
	// bytes, whatever its chunks' digests say; a chunk more may follow (at most
	// maxStored(MaxChunkSize)), which stays under MaxGroupSize.
	groupCutSize = 32 << 20
	// groupCutFactor ends a group once it holds this many times the mean, so that an
	// unlucky run of digests cannot make one group of the whole disk.
	groupCutFactor = 8
)

// GroupChunksFor is the mean number of distinct chunks in a group of a disk holding data
// bytes (its allocated ranges) chunked with p. On a disk of at least 512 MiB of data: 2 MiB
// of raw data, and never fewer than 2 chunks. Chosen by measurement on the bench's disks
// (docs/benchmarks.md): the fewest blobs that keep a z-stream push within 0.6 of the seed
// and a one-file change within 0.10. On 770 MiB of data in 256 KiB chunks 8 chunks a
// group send 0.54 of a z-stream and 0.05 of a one-file change in 376 blobs instead of
// 2993, 12 send 0.60; on 6 GiB in 2 MiB chunks 2 send 0.54 and 4 send 0.64. Below 512
// MiB every chunk is its own group, as before groups: on the demo seed (about 50 MiB
// stored) groups of 8 made a one-file rebuild send 39 % of the seed, where single chunks
// send 9 %, and a small seed has few blobs to spare the registry anyway.
func GroupChunksFor(data int64, p Params) int {
	if data < minGroupedData {
		return 1
	}
	return int(max(2, groupMeanRaw/max(p.Avg, 1)))
}

// PackOption changes how Pack stores a disk.
type PackOption func(*packConfig)

type packConfig struct{ groupChunks int }

// WithGroupChunks makes groups of a mean of n chunks whatever the disk holds, for tests
// that need groups on a small disk.
func WithGroupChunks(n int) PackOption { return func(c *packConfig) { c.groupChunks = n } }

// EndsGroup tells whether a group with a mean of n chunks ends after the chunk whose raw
// digest is id: when the digest's first 8 bytes, as a number, are a multiple of n. The
// digest is of content, so the cut is too. An id that is not a hex digest never ends one.
func EndsGroup(id digest.Digest, n int) bool {
	if n <= 1 {
		return true
	}
	enc := id.Encoded()
	if len(enc) < 16 {
		return false
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(enc[:16])); err != nil {
		return false
	}
	return binary.BigEndian.Uint64(b[:])%uint64(n) == 0
}

// GroupCutter says where the groups of a pack end, chunk after chunk in pack order: after
// a chunk EndsGroup names, or when a group has grown to groupCutFactor times the mean or
// groupCutSize stored bytes.
type GroupCutter struct {
	n     int
	count int
	size  int64
}

// NewGroupCutter cuts groups of a mean of n chunks.
func NewGroupCutter(n int) *GroupCutter { return &GroupCutter{n: max(n, 1)} }

// Ends adds the next distinct chunk (raw digest id, stored size) to the group and tells
// whether the group ends after it.
func (g *GroupCutter) Ends(id digest.Digest, stored int64) bool {
	g.count++
	g.size += stored
	if EndsGroup(id, g.n) || g.count >= groupCutFactor*g.n || g.size >= groupCutSize {
		g.count, g.size = 0, 0
		return true
	}
	return false
}

// Group is a run of consecutive distinct chunks of the pack, one registry blob.
type Group struct {
	Digest digest.Digest // sha256 of the stored bytes of its chunks, in order
	Offset int64         // in the pack
	Size   int64
	Blobs  []Blob // its chunks, each At its offset inside the group
}

// Groups lists the groups of the pack in order. In an index before version 3 every
// distinct chunk is a group of its own, whose digest is the chunk's blob digest.
func (x *Index) Groups() []Group {
	blobs, _ := x.Blobs()
	var out []Group
	for _, b := range blobs {
		if x.Version < 3 || len(out) == 0 || out[len(out)-1].Digest != b.Group {
			d := b.Group
			if x.Version < 3 {
				d = b.Digest
			}
			out = append(out, Group{Digest: d, Offset: b.Offset})
		}
		g := &out[len(out)-1]
		g.Blobs = append(g.Blobs, b)
		g.Size += b.Size
	}
	return out
}

// validateGroups checks that the groups of a version 3 index tile the pack: each group's
// chunks are consecutive in pack order, the first at 0 inside it and every next one where
// the one before ends, and no group comes back after another has begun. The chunks'
// sizes are bounded already (Validate), so the sums here do not overflow.
func (x *Index) validateGroups() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if x.GroupChunks < 1 || x.GroupChunks > MaxGroupChunkCount {
		bad("groupChunks %d is not within 1..%d", x.GroupChunks, MaxGroupChunkCount)
	}
	seen := map[digest.Digest]bool{}
	var cur Group
	blobs, _ := x.Blobs()
	for _, b := range blobs {
		if len(errs) > 20 {
			bad("and more")
			break
		}
		if b.Group == cur.Digest && len(cur.Blobs) > 0 {
			if b.At != cur.Size {
				bad("group %s: chunk %s is at %d inside it, where the chunk before ends at %d: chunks must tile their group", b.Group, b.Digest, b.At, cur.Size)
			}
		} else {
			if seen[b.Group] {
				bad("group %s: chunk %s comes after another group began: a group's chunks must be consecutive in the pack", b.Group, b.Digest)
			}
			if b.At != 0 {
				bad("group %s: its first chunk %s is at %d inside it, not 0", b.Group, b.Digest, b.At)
			}
			seen[b.Group] = true
			cur = Group{Digest: b.Group}
		}
		cur.Blobs = append(cur.Blobs, b)
		cur.Size = b.At + b.Size
		if cur.Size > MaxGroupSize || len(cur.Blobs) > MaxGroupChunkCount {
			bad("group %s: more than %d bytes or %d chunks", b.Group, MaxGroupSize, MaxGroupChunkCount)
			cur.Blobs = nil // reported once; the next chunk starts over
		}
	}
	return errs
}

// grouper assigns the chunks of a pack being written to groups, hashing each group's
// stored bytes as they are written.
type grouper struct {
	cut     *GroupCutter
	h       hash.Hash // the open group's sha256, nil before its first chunk
	size    int64
	members []digest.Digest // blob digests of the open group, in order
	at      map[digest.Digest]groupRef
	packs   *packCutter // nil when chunks are not grouped: such a pack is never sent as pack blobs
}

type groupRef struct {
	group digest.Digest
	at    int64
}

func newGrouper(n int) *grouper {
	g := &grouper{cut: NewGroupCutter(n), at: map[digest.Digest]groupRef{}}
	if n > 1 {
		g.packs = &packCutter{}
	}
	return g
}

// add appends the next distinct chunk's stored bytes to the open group, which it closes
// when the cutter says so. blobHash is the sha256 that hashed stored alone into blob, or
// nil: a group that begins with the chunk continues it rather than hashing stored again.
func (g *grouper) add(blob, id digest.Digest, stored []byte, blobHash hash.Hash) error {
	if g.packs != nil {
		if g.h == nil {
			if err := g.packs.groupBegins(); err != nil {
				return err
			}
		}
		g.packs.write(stored)
	}
	switch {
	case g.h != nil:
		g.h.Write(stored)
	case blobHash != nil:
		g.h = blobHash
	default:
		g.h = sha256.New()
		g.h.Write(stored)
	}
	g.at[blob] = groupRef{at: g.size}
	g.size += int64(len(stored))
	g.members = append(g.members, blob)
	if g.cut.Ends(id, int64(len(stored))) {
		return g.close()
	}
	return nil
}

// close ends the open group, if it holds a chunk.
func (g *grouper) close() error {
	if len(g.members) == 0 {
		return nil
	}
	if g.packs != nil {
		if err := g.packs.groupEnds(g.h, g.size); err != nil {
			return err
		}
	}
	d := digest.NewDigest(digest.SHA256, g.h)
	for _, m := range g.members {
		r := g.at[m]
		r.group = d
		g.at[m] = r
	}
	g.h, g.size, g.members = nil, 0, nil
	return nil
}

// assign sets every chunk's Group and At, and the index's pack blobs.
func (g *grouper) assign(x *Index) error {
	if err := g.close(); err != nil {
		return err
	}
	for i := range x.Chunks {
		r := g.at[x.Chunks[i].Blob]
		x.Chunks[i].Group, x.Chunks[i].At = r.group, r.at
	}
	if g.packs != nil {
		x.PackBlobs = g.packs.close()
	}
	return nil
}
