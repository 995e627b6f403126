package ociseed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/registry"
)

// deltaSeeds writes a chunked seed and a later build of it that differs in one place.
// firstDiskIndex reads the chunk index of the first disk of the seed in dir.
func firstDiskIndex(t *testing.T, dir string, m *seed.Manifest) *diskpack.Index {
	t.Helper()
	x, err := seed.ReadIndex(dir, m.Disks[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func deltaSeeds(t *testing.T) (a, b string, ma, mb *seed.Manifest) {
	t.Helper()
	a, b = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	o := seedtest.Options{RawSize: 8 << 20, Seed: 11, Formats: []string{seed.FormatChunked}, Credentials: true, SBOM: true}
	ma = seedtest.Write(t, a, o)
	o.Change = func(raw []byte) { copy(raw[3<<20:], []byte("one file changed in the rebuild")) }
	mb = seedtest.Write(t, b, o)
	return a, b, ma, mb
}

// A chunked seed goes to a registry as an index of manifests whose layers are its chunks;
// a later build sends only the chunks that changed, and a pull --from an earlier seed or
// its raw disk fetches only those; every file comes back byte for byte.
func TestDeltaRoundTrip(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, b, ma, mb := deltaSeeds(t)
	ctx := context.Background()
	first, err := ociseed.Push(ctx, a, r.Ref("seeds/demo:a"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if first.Sent != first.Bytes || first.Blobs < 20 {
		t.Errorf("first push sent %d of %d bytes in %d blobs", first.Sent, first.Bytes, first.Blobs)
	}

	// skopeo, an independent client, reads the index and its first manifest.
	var top ocispec.Index
	if err := json.Unmarshal([]byte(skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+r.Ref("seeds/demo:a"))), &top); err != nil {
		t.Fatal(err)
	}
	if top.MediaType != ocispec.MediaTypeImageIndex || top.ArtifactType != seed.ArtifactType || len(top.Manifests) == 0 ||
		top.Annotations[ocispec.AnnotationTitle] != "demo" {
		t.Fatalf("top = %+v", top)
	}
	var part ocispec.Manifest
	if err := json.Unmarshal([]byte(skopeo(t, "inspect", "--raw", "--tls-verify=false",
		"docker://"+r.Ref("seeds/demo@"+top.Manifests[0].Digest.String()))), &part); err != nil {
		t.Fatal(err)
	}
	if part.Config.MediaType != seed.MediaTypeManifest || part.Layers[0].MediaType != ociseed.MediaTypeDiskIndex {
		t.Errorf("first manifest: config %s, first layer %s", part.Config.MediaType, part.Layers[0].MediaType)
	}

	// The later build: only the changed chunks are sent.
	r.Reset()
	second, err := ociseed.Push(ctx, b, r.Ref("seeds/demo:b"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if second.Sent == 0 || second.Sent > second.Bytes/10 {
		t.Errorf("the rebuild sent %d of %d bytes", second.Sent, second.Bytes)
	}
	if n := uploads(r.Requests()); n == 0 || n > 6 {
		t.Errorf("the rebuild started %d uploads", n)
	}

	// An unchanged seed again: no uploads.
	r.Reset()
	if again, err := ociseed.Push(ctx, b, r.Ref("seeds/demo:b2"), opts()...); err != nil || again.Sent != 0 {
		t.Fatalf("re-push: %+v, %v", again, err)
	}
	// A manifest check, not a HEAD per chunk: the registry has the seed's index.
	if reqs := r.Requests(); uploads(reqs) != 0 || registry.Summarize(reqs).BlobHeads != 0 {
		t.Errorf("re-push started %d uploads and made %d blob HEADs", uploads(reqs), registry.Summarize(reqs).BlobHeads)
	}

	pulledA := filepath.Join(t.TempDir(), "a")
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:a"), pulledA, opts()...); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, a, pulledA, ma)

	rawA := filepath.Join(t.TempDir(), "a.raw")
	if _, err := seed.WriteDevice(ctx, a, rawA); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{pulledA, rawA} {
		t.Run(filepath.Base(from), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "b")
			var st ociseed.PullStats
			r.Reset()
			if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:b"), dst, opts(ociseed.WithFrom(from), ociseed.WithPullStats(&st))...); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, b, dst, mb)
			if st.Reused == 0 || st.Fetched == 0 || st.FetchedBytes > st.ReusedBytes/5 {
				t.Errorf("pull --from %s: %+v", from, st)
			}
			if got := r.Stats().BlobGetBytes; got > second.Bytes/5 {
				t.Errorf("the registry served %d blob bytes of %d", got, second.Bytes)
			}
		})
	}
}

// Pulling into a directory that holds an earlier seed updates it in place as a delta.
func TestDeltaPullIntoEarlierSeed(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, b, _, mb := deltaSeeds(t)
	ctx := context.Background()
	for _, p := range [][2]string{{a, "seeds/demo:a"}, {b, "seeds/demo:b"}} {
		if _, err := ociseed.Push(ctx, p[0], r.Ref(p[1]), opts()...); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "seed")
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:a"), dir, opts()...); err != nil {
		t.Fatal(err)
	}
	var st ociseed.PullStats
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:b"), dir, opts(ociseed.WithPullStats(&st))...); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, b, dir, mb)
	if st.Reused == 0 || st.FetchedBytes > st.ReusedBytes/5 {
		t.Errorf("pull over the earlier seed: %+v", st)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 5 {
		t.Errorf("%d entries left in the seed directory, want its 5 files", len(entries))
	}
}

// A damaged chunk in OLD is named, then fetched; a damaged chunk in the registry is named
// and the pull refused, leaving no seed behind.
func TestDeltaDamagedChunks(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, b, _, mb := deltaSeeds(t)
	ctx := context.Background()
	for _, p := range [][2]string{{a, "seeds/demo:a"}, {b, "seeds/demo:b"}} {
		if _, err := ociseed.Push(ctx, p[0], r.Ref(p[1]), opts()...); err != nil {
			t.Fatal(err)
		}
	}
	// Damage the first chunk of the earlier seed's pack.
	pack := filepath.Join(a, seedtest.PackFile)
	buf, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	buf[10] ^= 0xff
	if err := os.WriteFile(pack, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	var st ociseed.PullStats
	dst := filepath.Join(t.TempDir(), "b")
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:b"), dst, opts(ociseed.WithFrom(a), ociseed.WithPullStats(&st))...); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, b, dst, mb)
	if st.Reused == 0 || st.Fetched < 2 {
		t.Errorf("with a damaged OLD: %+v", st)
	}

	// Damage a chunk blob in the registry's storage.
	x := firstDiskIndex(t, b, mb)
	bad := x.Chunks[len(x.Chunks)/2].Group
	damageBlob(t, r, bad)
	fresh := filepath.Join(t.TempDir(), "fresh")
	_, err = ociseed.Pull(ctx, r.Ref("seeds/demo:b"), fresh, opts()...)
	var ce *diskpack.ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), bad.String()) || !strings.Contains(err.Error(), "disk offset") ||
		!strings.Contains(err.Error(), "blake3 check mismatch") {
		t.Fatalf("Pull = %v, want a chunk error naming %s and its blake3 check", err, bad)
	}
	if _, err := os.Stat(filepath.Join(fresh, seed.ManifestFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused pull left seed.json: %v", err)
	}
}

// A pull stopped part way resumes from the chunks it staged: they are checked, not fetched.
func TestDeltaPullResumes(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, _, ma, _ := deltaSeeds(t)
	ctx := context.Background()
	if _, err := ociseed.Push(ctx, a, r.Ref("seeds/demo:a"), opts()...); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "a")
	cctx, cancel := context.WithCancel(ctx)
	_, err := ociseed.Pull(cctx, r.Ref("seeds/demo:a"), dst, opts(ociseed.WithJobs(1), ociseed.WithProgress(func(p ociseed.Progress) {
		if strings.HasPrefix(p.What, "chunk at") && p.Done == 5 {
			cancel()
		}
	}))...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull = %v", err)
	}
	var st ociseed.PullStats
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:a"), dst, opts(ociseed.WithPullStats(&st))...); err != nil {
		t.Fatal(err)
	}
	if st.Resumed < 5 || st.Fetched == 0 {
		t.Errorf("resumed pull: %+v", st)
	}
	sameFiles(t, a, dst, ma)
}

// A pack changed after sealing is not hashed again on its way to a registry, which checks
// each blob itself: the push fails naming the chunk, as a bad seed, and tags nothing.
func TestDeltaPushRefusesChangedPack(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatChunked}})
	p := filepath.Join(src, seedtest.PackFile)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o600)
	_, err := ociseed.Push(context.Background(), src, r.Ref("seeds/changed:v1"), opts()...)
	if !errors.Is(err, seed.ErrBadSeed) || !strings.Contains(err.Error(), "the seed changed since it was sealed") || !strings.Contains(err.Error(), "disk.pack chunk") {
		t.Fatalf("Push = %v, want a bad seed naming the changed chunk", err)
	}
	if _, _, err := ociseed.DiskIndex(context.Background(), r.Ref("seeds/changed:v1"), opts()...); err == nil {
		t.Error("the changed seed was tagged")
	}
}

// A seed whose chunk index is version 1 (sealed before chunks carried a BLAKE3 check) or
// 2 (before chunk groups) still pushes, pulls, verifies and writes, one blob per chunk:
// its chunks are checked by their sha256 digests (version 1) or BLAKE3 checks, and a
// damaged one is refused. A site holding such a seed, or the disk written from it, pulls
// a later grouped build --from it and fetches only the chunks it lacks.
func TestDeltaOlderIndexVersions(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) { testOlderIndex(t, version) })
	}
}

func testOlderIndex(t *testing.T, version int) {
	r := registry.StartT(t, registry.Options{})
	a, b, ma, mb := deltaSeeds(t)
	x := rewriteIndex(t, a, ma, func(x *diskpack.Index) {
		x.Version, x.GroupChunks, x.PackBlobs = version, 0, nil
		for i := range x.Chunks {
			x.Chunks[i].Group, x.Chunks[i].At = "", 0
			if version == 1 {
				x.Chunks[i].Check = ""
			}
		}
	})
	ctx := context.Background()
	res, err := ociseed.Push(ctx, a, r.Ref("seeds/old:1"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if blobs, _ := x.Blobs(); res.Blobs < len(blobs) {
		t.Errorf("pushed %d blobs for %d chunks", res.Blobs, len(blobs))
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	if _, err := ociseed.Pull(ctx, r.Ref("seeds/old:1"), dst, opts()...); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, a, dst, ma)
	if err := seed.Verify(ctx, dst); err != nil {
		t.Fatalf("seed verify of the pulled version %d seed: %v", version, err)
	}
	rawOut := filepath.Join(t.TempDir(), "written.raw")
	if _, err := seed.WriteDevice(ctx, dst, rawOut); err != nil {
		t.Fatalf("writing the pulled version %d seed: %v", version, err)
	}
	pullGroupedFromOld(t, r, b, mb, x, dst, rawOut)

	bad := x.Chunks[0].Blob
	damageBlob(t, r, bad)
	_, err = ociseed.Pull(ctx, r.Ref("seeds/old:1"), filepath.Join(t.TempDir(), "fresh"), opts()...)
	var ce *diskpack.ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), bad.String()) || strings.Contains(err.Error(), "blake3") != (version > 1) {
		t.Fatalf("Pull of a damaged version %d chunk = %v, want a chunk error naming %s", version, err, bad)
	}
}

// pullGroupedFromOld pushes the grouped seed b and pulls it --from each of froms, an
// earlier seed of index x or its disk: only the chunks x lacks are fetched, by ranges on
// b's groups, and b comes back byte for byte.
func pullGroupedFromOld(t *testing.T, r *registry.Registry, b string, mb *seed.Manifest, x *diskpack.Index, froms ...string) {
	t.Helper()
	ctx := context.Background()
	xb := firstDiskIndex(t, b, mb)
	if blobs, _ := xb.Blobs(); xb.Version < 3 || len(xb.Groups()) >= len(blobs) {
		t.Fatalf("the later build is index version %d with %d groups of %d chunks, want groups", xb.Version, len(xb.Groups()), len(blobs))
	}
	if _, err := ociseed.Push(ctx, b, r.Ref("seeds/old:2"), opts()...); err != nil {
		t.Fatal(err)
	}
	want := missingBytes(xb, x)
	for _, from := range froms {
		var st ociseed.PullStats
		dst := filepath.Join(t.TempDir(), "grouped")
		if _, err := ociseed.Pull(ctx, r.Ref("seeds/old:2"), dst, opts(ociseed.WithFrom(from), ociseed.WithPullStats(&st))...); err != nil {
			t.Fatalf("pull of the grouped build --from %s: %v", from, err)
		}
		sameFiles(t, b, dst, mb)
		if want == 0 || st.FetchedBytes != want || st.Reused == 0 || st.Ranges == 0 {
			t.Errorf("pull --from %s: %+v, want %d bytes fetched by ranges", from, st, want)
		}
	}
}

// damageBlob flips a byte in the middle of blob d in the registry's storage.
func damageBlob(t *testing.T, r *registry.Registry, d digest.Digest) {
	t.Helper()
	editBlob(t, r, d, func(b []byte) []byte {
		b[len(b)/2] ^= 0xff
		return b
	})
}

// editBlob replaces blob d in the registry's storage with what edit makes of it.
func editBlob(t *testing.T, r *registry.Registry, d digest.Digest, edit func([]byte) []byte) {
	t.Helper()
	p := filepath.Join(r.StorageDir(), "docker/registry/v2/blobs/sha256", d.Encoded()[:2], d.Encoded(), "data")
	blob, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(blob), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A chunk the registry serves with bytes after its own is refused, naming it.
func TestDeltaLongBlobRefused(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, _, ma, _ := deltaSeeds(t)
	ctx := context.Background()
	if _, err := ociseed.Push(ctx, a, r.Ref("seeds/demo:a"), opts()...); err != nil {
		t.Fatal(err)
	}
	x := firstDiskIndex(t, a, ma)
	long := x.Chunks[1].Group
	editBlob(t, r, long, func(b []byte) []byte { return append(b, "and more"...) })
	_, err := ociseed.Pull(ctx, r.Ref("seeds/demo:a"), filepath.Join(t.TempDir(), "a"), opts(ociseed.WithJobs(1))...)
	var ce *diskpack.ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), long.String()) || !strings.Contains(err.Error(), "holds more than") {
		t.Fatalf("Pull = %v, want a chunk error naming %s as too long", err, long)
	}
}
