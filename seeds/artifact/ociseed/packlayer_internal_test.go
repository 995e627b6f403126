package ociseed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// testGroup is a group of one chunk of size bytes, named by n.
func testGroup(n string, offset, size int64) diskpack.Group {
	d := digest.FromString(n)
	return diskpack.Group{Digest: d, Offset: offset, Size: size, Blobs: []diskpack.Blob{{Digest: d, Size: size, Offset: offset, Group: d}}}
}

// A pack layer's annotation places the groups it holds; the offsets a registry's manifest
// gives are believed only inside the blob, and groups that lie one after another in one
// blob are fetched together, in runs of at most maxUnit bytes.
func TestPackLayerPlaces(t *testing.T) {
	a, b, c := testGroup("a", 0, 100), testGroup("b", 100, 50), testGroup("c", 150, 30)
	pack := ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: digest.FromString("pack"), Size: 180,
		Annotations: map[string]string{AnnotationGroups: encodeGroups([]diskpack.Group{a, b, c}, []int64{0, 100, 150})}}
	places := map[digest.Digest]groupPlace{}
	if err := decodeGroups(pack, places); err != nil {
		t.Fatal(err)
	}
	units, descs, err := fillUnits([]diskpack.Group{a, b, c}, places)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 1 || units[0].Size != 180 || len(units[0].Blobs) != 3 || units[0].Blobs[2].At != 150 || descs[0].Digest != pack.Digest {
		t.Fatalf("units %+v, want one run of the whole pack", units)
	}
	if s := spans(descs[0], units[0].Blobs); len(s) != 1 || !s[0].whole {
		t.Errorf("spans of the whole pack = %+v, want one whole GET", s)
	}

	// A run stops at maxUnit bytes, and where the next group lies elsewhere.
	big := []diskpack.Group{testGroup("x", 0, maxUnit-10), testGroup("y", maxUnit-10, 20), testGroup("z", maxUnit+10, 5)}
	bigPack := ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: digest.FromString("big"), Size: maxUnit + 100}
	placed := map[digest.Digest]groupPlace{big[0].Digest: {bigPack, 0}, big[1].Digest: {bigPack, maxUnit - 10}, big[2].Digest: {bigPack, maxUnit + 50}}
	if units, _, err := fillUnits(big, placed); err != nil || len(units) != 3 || units[2].Blobs[0].At != maxUnit+50 {
		t.Errorf("fillUnits = %+v, %v: want three runs, the last at its place", units, err)
	}

	for _, tc := range []struct {
		name, groups string
		size         int64
		want         string
	}{
		{"an offset past the blob", a.Digest.Encoded() + "@180", 180, "not HEX@OFFSET"},
		{"a negative offset", a.Digest.Encoded() + "@-1", 180, "not HEX@OFFSET"},
		{"not a digest", "zz@0", 180, "not HEX@OFFSET"},
		{"no offset", a.Digest.Encoded(), 180, "not HEX@OFFSET"},
		{"no groups", "", 180, "lists no chunk groups"},
		{"a group running past the blob's end", a.Digest.Encoded() + "@150", 180, "does not lie inside blob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ocispec.Descriptor{MediaType: MediaTypeDiskPack, Digest: pack.Digest, Size: tc.size, Annotations: map[string]string{AnnotationGroups: tc.groups}}
			places := map[digest.Digest]groupPlace{}
			err := decodeGroups(l, places)
			if err == nil {
				_, _, err = fillUnits([]diskpack.Group{a}, places)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// A group's own blob must be the group's size: the whole GET reads it to its end.
	wrong := map[digest.Digest]groupPlace{a.Digest: {ocispec.Descriptor{MediaType: MediaTypeDiskGroup, Digest: a.Digest, Size: 120}, 0}}
	if _, _, err := fillUnits([]diskpack.Group{a}, wrong); err == nil || !strings.Contains(err.Error(), "does not lie inside") {
		t.Errorf("a group blob of the wrong size: err = %v", err)
	}
}

// A pack blob of an index that records none (version 3) is hashed from the pack, and its
// groups are checked against the index as they are read: a changed pack is refused before
// anything is sent.
func TestHashPackRange(t *testing.T) {
	data := []byte("first group, then the second")
	groups := []diskpack.Group{{Digest: digest.FromBytes(data[:12]), Offset: 0, Size: 12}, {Digest: digest.FromBytes(data[12:]), Offset: 12, Size: int64(len(data) - 12)}}
	path := filepath.Join(t.TempDir(), "disk.pack")
	if err := os.WriteFile(path, append([]byte("head"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range groups {
		groups[i].Offset += 4
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := seed.Disk{File: "disk.pack"}
	r := diskpack.PackRange{PackBlob: diskpack.PackBlob{Offset: 4, Size: int64(len(data))}, Groups: groups}
	b, err := hashPackRange(context.Background(), f, r, d)
	if err != nil || b.desc.Digest != digest.FromBytes(data) || b.desc.Size != int64(len(data)) {
		t.Fatalf("hashPackRange = %v, %v; want the digest of the range", b.desc, err)
	}
	places := map[digest.Digest]groupPlace{}
	if err := decodeGroups(b.desc, places); err != nil || places[groups[1].Digest].at != 12 {
		t.Errorf("the annotation places the second group at %d (%v), want 12", places[groups[1].Digest].at, err)
	}
	groups[1].Digest = digest.FromString("something else")
	if _, err := hashPackRange(context.Background(), f, r, d); !errors.Is(err, seed.ErrBadSeed) || !strings.Contains(err.Error(), "run seed verify") {
		t.Errorf("a changed group: err = %v, want ErrBadSeed telling to run seed verify", err)
	}
}
