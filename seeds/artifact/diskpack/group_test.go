package diskpack

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// cutGroups groups ids in order as a pack's chunks are grouped (each stored size given
// by stored), returning each group as its ids joined.
func cutGroups(ids []digest.Digest, n int, stored int64) []string {
	cut := NewGroupCutter(n)
	var out []string
	var cur []string
	for _, id := range ids {
		cur = append(cur, string(id))
		if cut.Ends(id, stored) {
			out = append(out, strings.Join(cur, ","))
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, ","))
	}
	return out
}

func testIDs(n int, salt string) []digest.Digest {
	ids := make([]digest.Digest, n)
	for i := range ids {
		ids[i] = sha256Of(fmt.Appendf(nil, "%s%d", salt, i))
	}
	return ids
}

// A group ends where a chunk's digest says, so an insertion, a removal or a change moves
// only the groups around it: every group of the old sequence that does not hold the
// changed place is still a group of the new one. Cutting by count would shift every group
// after an insertion.
func TestGroupsStableUnderEdits(t *testing.T) {
	base := testIDs(2000, "chunk")
	extra := testIDs(3, "new")
	for _, tc := range []struct {
		name string
		edit func([]digest.Digest) []digest.Digest
		at   int
	}{
		{"insert at the start", func(s []digest.Digest) []digest.Digest { return slices.Insert(s, 0, extra[0]) }, 0},
		{"insert in the middle", func(s []digest.Digest) []digest.Digest { return slices.Insert(s, 1000, extra[0]) }, 1000},
		{"insert three", func(s []digest.Digest) []digest.Digest { return slices.Insert(s, 700, extra...) }, 700},
		{"remove one", func(s []digest.Digest) []digest.Digest { return slices.Delete(s, 1200, 1201) }, 1200},
		{"change one", func(s []digest.Digest) []digest.Digest { s[333] = extra[1]; return s }, 333},
		{"append", func(s []digest.Digest) []digest.Digest { return append(s, extra[2]) }, 2000},
	} {
		for _, n := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				before := cutGroups(base, n, 1<<20)
				after := cutGroups(tc.edit(slices.Clone(base)), n, 1<<20)
				have := map[string]bool{}
				for _, g := range after {
					have[g] = true
				}
				lost := 0
				for _, g := range before {
					if !have[g] {
						lost++
					}
				}
				// The group holding the edit, and the one after it when the edit removed
				// or changed the chunk that ended its group.
				if lost > 2 {
					t.Errorf("%d of %d groups changed, want at most 2", lost, len(before))
				}
				if want := len(base) / n; len(before) < want*8/10 || len(before) > want*12/10 {
					t.Errorf("%d groups of %d chunks, want about %d", len(before), len(base), want)
				}
			})
		}
	}
}

// The cutter ends a group at its bounds whatever the digests say: groupCutFactor times
// the mean, or groupCutSize stored bytes.
func TestGroupCutterBounds(t *testing.T) {
	never := digest.Digest("sha256:" + strings.Repeat("f", 64)) // 2^64-1 is odd: never a multiple of 2
	for _, tc := range []struct {
		name   string
		n      int
		stored int64
		want   int // chunks per group
	}{
		{"count", 2, 1 << 20, groupCutFactor * 2},
		{"size", 2, 10 << 20, 4},
		{"one a group", 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := NewGroupCutter(tc.n)
			for i := 1; i <= 3*tc.want; i++ {
				if got := cut.Ends(never, tc.stored); got != (i%tc.want == 0) {
					t.Fatalf("chunk %d: ends %v", i, got)
				}
			}
		})
	}
}

// groupedIndex is a valid index of three distinct chunks of 50 stored bytes in one group,
// then a fourth in a group of its own, the two groups one pack blob.
func groupedIndex() *Index {
	x := &Index{Version: IndexVersion, Size: 1 << 20, Algorithm: Algorithm, Params: small, Compression: CompressionZstd, GroupChunks: 2,
		PackBlobs: []PackBlob{{Offset: 0, Size: 200, Digest: sha256Of([]byte("pack blob"))}}}
	g1, g2 := sha256Of([]byte("group 1")), sha256Of([]byte("group 2"))
	for i := range 4 {
		stored := fmt.Appendf(nil, "stored %d", i)
		c := Chunk{Offset: int64(i) * 4096, Size: 100, ID: sha256Of(fmt.Appendf(nil, "raw %d", i)), Blob: sha256Of(stored),
			Stored: 50, Check: checkOf(stored), Group: g1, At: int64(i) * 50}
		if i == 3 {
			c.Group, c.At = g2, 0
		}
		x.Chunks = append(x.Chunks, c)
	}
	return x
}

// An index from outside is held to its groups tiling the pack: each group's chunks follow
// one another from 0 without gap or overlap, a group is one run, and its size is bounded.
func TestValidateGroups(t *testing.T) {
	if err := groupedIndex().Validate(); err != nil {
		t.Fatal(err)
	}
	if gs := groupedIndex().Groups(); len(gs) != 2 || gs[0].Size != 150 || gs[1].Offset != 150 || len(gs[0].Blobs) != 3 {
		t.Fatalf("Groups = %+v", gs)
	}
	for _, tc := range []struct {
		name   string
		change func(*Index)
		want   string
	}{
		{"gap", func(x *Index) { x.Chunks[1].At = 60 }, "at 60 inside it, where the chunk before ends at 50"},
		{"overlap", func(x *Index) { x.Chunks[2].At = 90 }, "at 90 inside it, where the chunk before ends at 100"},
		{"first not at 0", func(x *Index) { x.Chunks[3].At = 10 }, "its first chunk"},
		{"group in two runs", func(x *Index) {
			x.Chunks[3].Group = x.Chunks[0].Group
			x.Chunks[2].Group, x.Chunks[2].At = x.Chunks[3].Group, 0
		}, ""},
		{"group comes back", func(x *Index) { x.Chunks[1].Group, x.Chunks[1].At = sha256Of([]byte("other")), 0 }, "must be consecutive"},
		{"at past the bound", func(x *Index) { x.Chunks[1].At = MaxGroupSize + 1 }, "within 0.."},
		{"negative at", func(x *Index) { x.Chunks[1].At = -50 }, "within 0.."},
		{"no groupChunks", func(x *Index) { x.GroupChunks = 0 }, "groupChunks 0"},
		{"groupChunks in version 2", func(x *Index) {
			x.Version = 2
			for i := range x.Chunks {
				x.Chunks[i].Group, x.Chunks[i].At = "", 0
			}
		}, "groupChunks 2: a version 2 index has no groups"},
		{"too many chunks", func(x *Index) {
			x.Size = MaxDiskSize
			for i := range MaxGroupChunkCount {
				stored := fmt.Appendf(nil, "more %d", i)
				x.Chunks = append(x.Chunks, Chunk{Offset: int64(4+i) * 4096, Size: 100, ID: sha256Of(fmt.Appendf(nil, "more raw %d", i)),
					Blob: sha256Of(stored), Stored: 50, Check: checkOf(stored), Group: x.Chunks[3].Group, At: int64(i+1) * 50})
			}
		}, "chunks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := groupedIndex()
			tc.change(x)
			if err := x.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// Pack cuts groups as the cutter says and records each chunk's place in its group; the
// group's digest is of its chunks' stored bytes in pack order.
func TestPackGroups(t *testing.T) {
	data := content(3<<20, 7)
	size := int64(len(data))
	f := sparseFile(t, size, map[int64][]byte{0: data})
	x, p := pack(t, f, size, small)
	if x.Version != IndexVersion || x.GroupChunks != 2 {
		t.Fatalf("Pack wrote version %d with %d chunks a group", x.Version, x.GroupChunks)
	}
	blobs, _ := x.Blobs()
	groups := x.Groups()
	if len(groups) >= len(blobs) || len(groups) < 2 {
		t.Fatalf("%d groups of %d chunks", len(groups), len(blobs))
	}
	cut := NewGroupCutter(x.GroupChunks)
	var end int64
	for _, g := range groups {
		if g.Offset != end || digest.FromBytes(p[g.Offset:g.Offset+g.Size]) != g.Digest {
			t.Fatalf("group %s at %d (%d bytes) is not the pack's bytes there", g.Digest, g.Offset, g.Size)
		}
		for i, b := range g.Blobs {
			if ends := cut.Ends(b.ID, b.Size); ends != (i == len(g.Blobs)-1) && g.Offset+g.Size != int64(len(p)) {
				t.Fatalf("group at %d: chunk %d ends a group: %v", g.Offset, i, ends)
			}
		}
		end += g.Size
	}
}

// The mean group is 2 MiB of raw data and never under 2 chunks, on a disk with 512 MiB of
// data or more; on less, every chunk is a group.
func TestGroupChunksFor(t *testing.T) {
	for _, tc := range []struct {
		data int64
		avg  int64
		want int
	}{
		{50 << 20, 256 << 10, 1},  // the demo seed
		{511 << 20, 256 << 10, 1}, //
		{770 << 20, 256 << 10, 8}, // the 2 GiB bench disk
		{2 << 30, 512 << 10, 4},
		{6 << 30, 2 << 20, 2}, // the 16 GiB bench disk
		{1 << 40, 2 << 20, 2},
	} {
		p := Params{Min: tc.avg / 4, Avg: tc.avg, Max: tc.avg * 4}
		if got := GroupChunksFor(tc.data, p); got != tc.want {
			t.Errorf("GroupChunksFor(%d, avg %d) = %d, want %d", tc.data, tc.avg, got, tc.want)
		}
	}
}
