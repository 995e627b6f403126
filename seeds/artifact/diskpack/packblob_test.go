package diskpack

import (
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// A pack is cut into pack blobs of at most MaxPackBlob, each ending at a group boundary;
// a group larger than that is a blob alone.
func TestCutPackRangesAreBounded(t *testing.T) {
	const mib = 1 << 20
	sizes := []int64{20 * mib, 10 * mib, 5 * mib, MaxPackBlob + 8*mib, mib, mib}
	var groups []Group
	var at int64
	for i, n := range sizes {
		groups = append(groups, Group{Digest: sha256Of([]byte{byte(i)}), Offset: at, Size: n})
		at += n
	}
	var got []int64
	for _, r := range cutPackRanges(groups) {
		got = append(got, r.Size)
		if r.Offset != r.Groups[0].Offset || r.Digest != "" {
			t.Errorf("range at %d begins with the group at %d, digest %q", r.Offset, r.Groups[0].Offset, r.Digest)
		}
	}
	want := []int64{30 * mib, 5 * mib, MaxPackBlob + 8*mib, 2 * mib}
	if !slices.Equal(got, want) {
		t.Errorf("pack blob sizes = %v, want %v", got, want)
	}
}

// Pack records the pack blobs a push sends, cut as cutPackRanges cuts the groups, each
// with the digest of its bytes in the pack: here a pack of three pack blobs, so a group
// that does not fit ends one and begins the next. A version 3 index of the same pack (no
// pack blobs recorded) is cut the same, without digests.
func TestPackRecordsPackBlobs(t *testing.T) {
	data := content(180<<20, 9)
	size := int64(len(data))
	f := sparseFile(t, size, map[int64][]byte{0: data})
	x, p := pack(t, f, size, DefaultParams())
	if len(x.PackBlobs) < 3 {
		t.Fatalf("%d pack blobs for a %d MiB pack: the test needs 3 or more", len(x.PackBlobs), len(p)>>20)
	}
	ranges := x.PackRanges()
	cut := cutPackRanges(x.Groups())
	if len(ranges) != len(cut) {
		t.Fatalf("%d pack blobs recorded, %d cut", len(ranges), len(cut))
	}
	var end int64
	for i, r := range ranges {
		if r.Offset != cut[i].Offset || r.Size != cut[i].Size || len(r.Groups) != len(cut[i].Groups) {
			t.Errorf("pack blob %d: %d bytes at %d with %d groups; cut: %d at %d with %d", i, r.Size, r.Offset, len(r.Groups), cut[i].Size, cut[i].Offset, len(cut[i].Groups))
		}
		if got := digest.FromBytes(p[r.Offset : r.Offset+r.Size]); r.Digest != got {
			t.Errorf("pack blob %d at %d: recorded %s, its bytes are %s", i, r.Offset, r.Digest, got)
		}
		end = r.Offset + r.Size
	}
	if end != int64(len(p)) {
		t.Errorf("the pack blobs end at %d of the pack's %d bytes", end, len(p))
	}
	v3 := *x
	v3.Version, v3.PackBlobs = 3, nil
	if err := v3.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, r := range v3.PackRanges() {
		if r.Digest != "" || r.Offset != cut[i].Offset || r.Size != cut[i].Size {
			t.Errorf("version 3, pack blob %d: %d bytes at %d, digest %q", i, r.Size, r.Offset, r.Digest)
		}
	}
}

// An index from outside is held to its pack blobs tiling the pack at group boundaries,
// each bounded and named by a sha256 digest, and to having them only where a push uses
// them: a version 4 index of a grouped disk.
func TestValidatePackBlobs(t *testing.T) {
	d := sha256Of([]byte("pack blob"))
	for _, tc := range []struct {
		name   string
		change func(*Index)
		want   string
	}{
		{"none", func(x *Index) { x.PackBlobs = nil }, "0 listed for 2 chunk groups"},
		{"in version 3", func(x *Index) { x.Version = 3 }, "a version 3 index has none"},
		{"ungrouped", func(x *Index) { x.GroupChunks = 1 }, "not grouped"},
		{"not sha256", func(x *Index) { x.PackBlobs[0].Digest = "md5:abc" }, "not a sha256 digest"},
		{"inside a group", func(x *Index) { x.PackBlobs = []PackBlob{{0, 100, d}, {100, 100, d}} }, "does not end at a chunk group's end (150)"},
		{"not at a group", func(x *Index) { x.PackBlobs = []PackBlob{{0, 150, d}, {160, 40, d}} }, "offset 160 is not where"},
		{"short of the end", func(x *Index) { x.PackBlobs = []PackBlob{{0, 150, d}} }, "not at the pack's end"},
		{"past the end", func(x *Index) { x.PackBlobs = []PackBlob{{0, 150, d}, {150, 50, d}, {200, 50, d}} }, "3 listed for 2 chunk groups"},
		{"empty", func(x *Index) { x.PackBlobs = []PackBlob{{0, 0, d}, {0, 200, d}} }, "size 0 is not positive"},
		{"too large", func(x *Index) {
			for i := range x.Chunks {
				x.Chunks[i].Stored = 12 << 20
				x.Chunks[i].Size = 12 << 20
				x.Chunks[i].Offset = int64(i) * (12 << 20)
				x.Chunks[i].At = int64(i%3) * (12 << 20)
			}
			x.Params = Params{Min: 1 << 20, Avg: 4 << 20, Max: MaxChunkSize}
			x.Size = 64 << 20
			x.PackBlobs = []PackBlob{{0, 48 << 20, d}}
		}, "more than the 33554432 a pack blob of several groups may hold"},
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
