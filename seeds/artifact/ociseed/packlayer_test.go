package ociseed_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/test/registry"
)

// packOpts are the options of a push or pull that moves packs (no WithGroupBlobs).
func packOpts(extra ...ociseed.Option) []ociseed.Option {
	return append([]ociseed.Option{ociseed.WithChunkSize(chunk), ociseed.WithKeychain(authn.NewMultiKeychain())}, extra...)
}

// sentBlobs counts the blob uploads among reqs that sent bytes (a 201 to the POST is a mount).
func sentBlobs(reqs []registry.Request) int {
	n := 0
	for _, q := range reqs {
		if q.Method == http.MethodPut && q.Kind() == "upload" && q.Status == http.StatusCreated {
			n++
		}
	}
	return n
}

// A grouped seed pushed to a repository that holds none of its groups goes as its pack,
// here one pack blob (it is under MaxPackBlob, so the blob is the whole pack); a rebuild pushed beside it (another tag, found by the repository's tag list)
// sends only its new groups and points into the first pack for the rest. Both pull back
// byte for byte in fewer requests than they have groups, and a damaged pack is refused
// chunk by chunk.
func TestPushAsPack(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	a, b, ma, mb := deltaSeeds(t)
	ctx := context.Background()
	xa := firstDiskIndex(t, a, ma)
	xb := firstDiskIndex(t, b, mb)
	if _, err := ociseed.Push(ctx, a, r.Ref("seeds/demo:a"), packOpts()...); err != nil {
		t.Fatal(err)
	}
	if !blobStored(r, ma.Disks[0].Digest) || sentBlobs(r.Requests()) > 5 {
		t.Fatalf("first push: pack stored %v, %d uploads; want the pack, the index, seed.json, credentials and SBOM", blobStored(r, ma.Disks[0].Digest), sentBlobs(r.Requests()))
	}
	inA := map[digest.Digest]bool{}
	for _, g := range xa.Groups() {
		inA[g.Digest] = true
		if blobStored(r, g.Digest) {
			t.Errorf("group %s of the first push is a blob of its own", g.Digest)
		}
	}
	r.Reset()
	res, err := ociseed.Push(ctx, b, r.Ref("seeds/demo:b"), packOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	var newBytes int64
	newGroups := 0
	for _, g := range xb.Groups() {
		if !inA[g.Digest] {
			newBytes += g.Size
			newGroups++
		}
		if blobStored(r, g.Digest) == inA[g.Digest] {
			t.Errorf("group %s: a blob of its own %v, in the first pack %v", g.Digest, blobStored(r, g.Digest), inA[g.Digest])
		}
	}
	if newGroups == 0 || res.Sent < newBytes || res.Sent > newBytes+(64<<10) || sentBlobs(r.Requests()) > newGroups+3 {
		t.Errorf("second push sent %d bytes in %d uploads; its %d new groups hold %d", res.Sent, sentBlobs(r.Requests()), newGroups, newBytes)
	}

	// It counts its own bytes, not those of the first seed's pack it points into: as many
	// as the same seed pushed to a repository of its own.
	alone, err := ociseed.Push(ctx, b, r.Ref("seeds/alone:b"), packOpts()...)
	if err != nil || alone.Bytes != res.Bytes {
		t.Errorf("the second seed counts %d bytes beside the first, %d alone (%v)", res.Bytes, alone.Bytes, err)
	}

	for _, tc := range []struct {
		tag, dir string
		m        *seed.Manifest
		x        *diskpack.Index
		requests int64
	}{
		{"a", a, ma, xa, 1}, // the whole pack, one GET
		{"b", b, mb, xb, int64(len(xb.Groups()) - 1)},
	} {
		var st ociseed.PullStats
		dst := filepath.Join(t.TempDir(), tc.tag)
		if _, err := ociseed.Pull(ctx, r.Ref("seeds/demo:"+tc.tag), dst, packOpts(ociseed.WithPullStats(&st))...); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, tc.dir, dst, tc.m)
		if st.Requests > tc.requests {
			t.Errorf("pull of %s: %d requests for %d groups, want at most %d", tc.tag, st.Requests, len(tc.x.Groups()), tc.requests)
		}
	}

	// The unchanged seed again: nothing sent.
	r.Reset()
	if _, err := ociseed.Push(ctx, a, r.Ref("seeds/demo:a"), packOpts()...); err != nil || sentBlobs(r.Requests()) != 0 {
		t.Errorf("re-push: %v, %d uploads", err, sentBlobs(r.Requests()))
	}

	damageBlob(t, r, ma.Disks[0].Digest)
	_, err = ociseed.Pull(ctx, r.Ref("seeds/demo:a"), filepath.Join(t.TempDir(), "bad"), packOpts()...)
	var ce *diskpack.ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), ma.Disks[0].Digest.String()) || !strings.Contains(err.Error(), "blake3 check mismatch") {
		t.Fatalf("Pull of a damaged pack = %v, want a chunk error naming the pack blob", err)
	}
}

// blobStored tells whether the registry's storage holds blob d.
func blobStored(r *registry.Registry, d digest.Digest) bool {
	return fileExists(filepath.Join(r.StorageDir(), "docker/registry/v2/blobs/sha256", d.Encoded()[:2], d.Encoded(), "data"))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A seed sealed with its pack blobs' digests (index version 4) is pushed without reading
// its pack first, and one sealed before them (version 3) with its pack blobs hashed
// first; both pull back byte for byte. A pack changed since sealing is refused either way,
// as a bad seed that names the place, and nothing is tagged: by the push's own hashing
// (version 3) or by the registry, which hashes every blob it receives (version 4).
func TestPushAsPackIndexVersions(t *testing.T) {
	for _, version := range []int{3, diskpack.IndexVersion} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			r := registry.StartT(t, registry.Options{})
			a, _, ma, _ := deltaSeeds(t)
			if version == 3 {
				rewriteIndex(t, a, ma, func(x *diskpack.Index) { x.Version, x.PackBlobs = 3, nil })
			}
			x := firstDiskIndex(t, a, ma)
			if (len(x.PackBlobs) > 0) != (version >= 4) {
				t.Fatalf("version %d index with %d pack blobs recorded", x.Version, len(x.PackBlobs))
			}
			ctx := context.Background()
			if _, err := ociseed.Push(ctx, a, r.Ref("seeds/v:good"), packOpts()...); err != nil {
				t.Fatal(err)
			}
			if !blobStored(r, ma.Disks[0].Digest) {
				t.Fatal("the pack, under its pack's size bound, was not pushed as one pack blob")
			}
			dst := filepath.Join(t.TempDir(), "pulled")
			if _, err := ociseed.Pull(ctx, r.Ref("seeds/v:good"), dst, packOpts()...); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, a, dst, ma)

			p := filepath.Join(a, ma.Disks[0].File)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = ociseed.Push(ctx, a, r.Ref("seeds/changed:v1"), packOpts()...)
			if !errors.Is(err, seed.ErrBadSeed) || !strings.Contains(err.Error(), "the seed changed since it was sealed") || !strings.Contains(err.Error(), "disk.pack") {
				t.Fatalf("Push of a changed pack = %v, want a bad seed naming disk.pack", err)
			}
			if _, _, err := ociseed.DiskIndex(ctx, r.Ref("seeds/changed:v1"), packOpts()...); err == nil {
				t.Error("the changed seed was tagged")
			}
		})
	}
}

// rewriteIndex changes the index of the seed in dir, binds the manifest to it again and
// returns it.
func rewriteIndex(t *testing.T, dir string, m *seed.Manifest, change func(*diskpack.Index)) *diskpack.Index {
	t.Helper()
	d := m.Disks[0]
	x := firstDiskIndex(t, dir, m)
	change(x)
	enc, err := x.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, d.Index.File), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	d.Index.Size, d.Index.Digest = int64(len(enc)), digest.FromBytes(enc)
	m.Disks[0] = d
	if err := seed.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return x
}
