package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	trustpkg "github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// One byte changed in each piece of a signed seed, in turn, as an attacker holding the
// registry but not the key would change it: the manifest (the signature kept), a chunk
// of the disk, the signature, and the provenance attestation. Under an enforcing policy
// pull and write refuse each seed whose bytes they would use, name the reason, exit 2 and
// write nothing; seed inspect --key and cosign refuse the tampered provenance. (The site
// medium's row of the matrix is the reconfiguration hook's, in seeds/node/reconfigure and
// test/e2e's seed test.)
func TestTamperedSeedsAreRefused(t *testing.T) {
	ctx := context.Background()
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	// A write whose pull fails part way keeps its target's staging under $TMPDIR so that
	// the same write resumes (seedref.WithStagingFor): here, inside the test's own.
	t.Setenv("TMPDIR", t.TempDir())
	keys := t.TempDir()
	key := trusttest.Generate(t, filepath.Join(keys, "depot"), "depot secret")
	signer := key.Signer
	policy := enforcingPolicy(t, r, key.PubFile())

	// Each variant is its own signed seed with its own bytes, so changing one leaves the
	// others whole; the provenance is attested as publish attests it.
	publish := func(tag string, value uint64) (string, digest.Digest) {
		t.Helper()
		src := t.TempDir()
		seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: value})
		ref := r.Ref("seeds/du:" + tag)
		res, err := ociseed.Push(ctx, src, ref, ociseed.WithInsecure(true))
		if err != nil {
			t.Fatal(err)
		}
		if err := trustpkg.SignSeed(ctx, signer, ref, res.Digest, res.Instances, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ociseed.WithInsecure(true)); err != nil {
			t.Fatal(err)
		}
		if err := trustpkg.AttestSeed(ctx, signer, ref, res.Digest, trustpkg.PredicateSLSAProvenance, json.RawMessage(`{"buildDefinition":{}}`),
			ociseed.WithInsecure(true)); err != nil {
			t.Fatal(err)
		}
		return ref, res.Digest
	}
	good, _ := publish("good", 1)

	// The manifest: one byte of the index changed and pushed under the tag, with the
	// original signatures copied to the new digest, where a verifier looks for them.
	manifestRef, manifestDigest := publish("manifest", 2)
	raw := fetchManifest(t, manifestRef)
	changed := strings.Replace(string(raw), `"schemaVersion": 2`, `"schemaVersion":2`, 1)
	if changed == string(raw) {
		changed = strings.Replace(string(raw), `"schemaVersion":2`, `"schemaVersion": 2`, 1)
	}
	putManifest(t, manifestRef, []byte(changed))
	copyImage(t, attachment(r, manifestDigest, ociseed.KindSignature), attachment(r, digest.FromString(changed), ociseed.KindSignature))

	// A chunk of the disk, changed in the registry's storage under its digest.
	chunkRef, _ := publish("chunk", 3)
	chunkSeed, idx, err := ociseed.DiskIndex(ctx, chunkRef, ociseed.WithInsecure(true))
	if err != nil {
		t.Fatal(err)
	}
	// The blob that holds the chunk: its group's, or the one pack blob the seed was pushed
	// as (its pack is under diskpack.MaxPackBlob, so the blob is the whole pack).
	chunk := idx.Chunks[len(idx.Chunks)/2].Group
	if _, err := os.Stat(blobData(r, chunk)); err != nil {
		chunk = chunkSeed.Disks[0].Digest
	}
	flipByte(t, blobData(r, chunk))

	// The signature: one byte of its payload changed, its signature annotation kept.
	sigRef, sigDigest := publish("signature", 4)
	rewriteLayer(t, attachment(r, sigDigest, ociseed.KindSignature), func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"creator":"test"`, `"creator":"tesT"`, 1))
	})

	// The provenance: one byte of the signed statement inside the envelope changed.
	provRef, provDigest := publish("provenance", 5)
	rewriteLayer(t, attachment(r, provDigest, ociseed.KindAttestation), func(b []byte) []byte {
		var env trustpkg.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		env.Payload = []byte(strings.Replace(string(env.Payload), `"buildDefinition"`, `"buildDefinitioN"`, 1))
		out, _ := json.Marshal(env)
		return out
	})

	if code, stdout, stderr := runMain(t, append(policy, "seed", "pull", good, filepath.Join(t.TempDir(), "good"))...); code != 0 {
		t.Fatalf("the untouched seed: exit %d: %s%s", code, stdout, stderr)
	}
	for _, tc := range []struct {
		name, ref, want string
	}{
		{"manifest", manifestRef, "is refused by the trust policy"},
		{"chunk", chunkRef, chunk.Encoded()[:12]},
		{"signature", sigRef, "cryptographic signature verification failed"},
	} {
		dir := filepath.Join(t.TempDir(), "pulled")
		code, _, stderr := runMain(t, append(policy, "seed", "pull", tc.ref, dir)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("pull of the seed with a changed %s: exit %d, want 2 and %q:\n%s", tc.name, code, tc.want, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, seed.ManifestFile)); !os.IsNotExist(err) {
			t.Errorf("pull of the seed with a changed %s left a seed behind", tc.name)
		}
		dev := filepath.Join(t.TempDir(), "disk.img")
		code, _, stderr = runMain(t, append(policy, "seed", "write", "--image", tc.ref, "--device", dev)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("write of the seed with a changed %s: exit %d, want 2 and %q:\n%s", tc.name, code, tc.want, stderr)
		}
		if _, err := os.Stat(dev); !os.IsNotExist(err) {
			t.Errorf("write of the seed with a changed %s created the target", tc.name)
		}
	}

	// The provenance is checked by whoever reads it: seed inspect --key, and cosign.
	code, stdout, stderr := runMain(t, "seed", "inspect", "--key", key.PubFile(), provRef)
	if code != 2 || !strings.Contains(stdout, "NOT VERIFIED") || !strings.Contains(stderr, "attestation does not verify") {
		t.Errorf("inspect of the changed provenance: exit %d:\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain(t, "seed", "inspect", "--key", key.PubFile(), good); code != 0 {
		t.Errorf("inspect of the untouched seed: exit %d:\n%s%s", code, stdout, stderr)
	}
	cmd := exec.Command(testbin.Cosign(t), "verify-attestation", "--type", "slsaprovenance1", "--key", key.PubFile(),
		"--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry", provRef)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("cosign accepted the changed provenance:\n%s", out)
	}
}

// attachment is the tag of the attachments of kind for the manifest d in r's seeds/du.
func attachment(r *registry.Registry, d digest.Digest, kind string) string {
	return r.Ref("seeds/du:" + ociseed.AttachmentTag(d, kind))
}

func fetchManifest(t *testing.T, ref string) []byte {
	t.Helper()
	desc, err := remote.Get(mustRef(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	return desc.Manifest
}

func putManifest(t *testing.T, ref string, raw []byte) {
	t.Helper()
	if err := remote.Put(mustRef(t, ref), rawImageIndex(raw)); err != nil {
		t.Fatal(err)
	}
}

// rawImageIndex is a manifest pushed byte for byte.
type rawImageIndex []byte

func (m rawImageIndex) RawManifest() ([]byte, error)        { return m, nil }
func (m rawImageIndex) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }

func copyImage(t *testing.T, from, to string) {
	t.Helper()
	img, err := remote.Image(mustRef(t, from))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustRef(t, to), img); err != nil {
		t.Fatal(err)
	}
}

// rewriteLayer replaces the one layer of the attachment image at ref with change(layer),
// keeping its media type and annotations.
func rewriteLayer(t *testing.T, ref string, change func([]byte) []byte) {
	t.Helper()
	img, err := remote.Image(mustRef(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil || len(m.Layers) != 1 {
		t.Fatalf("%s: %d layers, %v", ref, len(m.Layers), err)
	}
	l, err := img.LayerByDigest(m.Layers[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	nb := change(b)
	if string(nb) == string(b) {
		t.Fatalf("%s: the change changed nothing", ref)
	}
	out, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(nb, m.Layers[0].MediaType), Annotations: m.Layers[0].Annotations})
	if err != nil {
		t.Fatal(err)
	}
	out = mutate.ConfigMediaType(mutate.MediaType(out, types.OCIManifestSchema1), types.OCIConfigJSON)
	if err := remote.Write(mustRef(t, ref), out); err != nil {
		t.Fatal(err)
	}
}

// blobData is where the registry stores blob d.
func blobData(r *registry.Registry, d digest.Digest) string {
	return filepath.Join(r.StorageDir(), "docker/registry/v2/blobs/sha256", d.Encoded()[:2], d.Encoded(), "data")
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A chunked seed in a registry whose chunk index gives a chunk the id of another chunk with
// other bytes (each blob whole and true to its digest, the index and manifests re-stored
// under their new digests, so nothing but the ids disagree) is refused by seed pull as
// verify and write refuse it: exit 2, naming the chunk, its id and both blobs, and DIR left
// with no seed, no chunk and no staging in it.
func TestSeedPullRefusesChunkIDThatDisagreesWithItsBlob(t *testing.T) {
	ctx := t.Context()
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 13, Formats: []string{seed.FormatChunked}})
	layout := filepath.Join(t.TempDir(), "layout")
	if _, err := ociseed.Push(ctx, dir, "oci:"+layout+":v1"); err != nil {
		t.Fatal(err)
	}
	var x diskpack.Index
	craftDeclaredSize(t, dir, layout, func(_ *seed.Manifest, idx *diskpack.Index) {
		if len(idx.Chunks) < 2 || idx.Chunks[0].Blob == idx.Chunks[1].Blob {
			t.Fatalf("the test seed needs two chunks with other bytes: %d chunks", len(idx.Chunks))
		}
		idx.Chunks[1].ID = idx.Chunks[0].ID
		x = *idx
	})
	ref := r.Ref("seeds/ids:v1")
	cmd := exec.CommandContext(ctx, testbin.Skopeo(t), "copy", "--insecure-policy", "--all", "--preserve-digests",
		"--dest-tls-verify=false", "oci:"+layout+":v1", "docker://"+ref)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copying the crafted seed into the registry: %v\n%s", err, out)
	}

	pulled := filepath.Join(t.TempDir(), "pulled")
	code, stdout, stderr := runMain(t, "seed", "pull", "--policy", acceptAnything(t), ref, pulled)
	want := fmt.Sprintf("chunks[1] at offset %d: id %s disagrees with its blob: chunks[0] has the same id with blob %s",
		x.Chunks[1].Offset, x.Chunks[0].ID, x.Chunks[0].Blob)
	if code != exitBadInput || !strings.Contains(stderr, want) || !strings.Contains(stderr, string(x.Chunks[1].Blob)) {
		t.Errorf("exit %d, want %d and %q naming this chunk's blob %s:\n%s%s", code, exitBadInput, want, x.Chunks[1].Blob, stdout, stderr)
	}
	if strings.Contains(stdout, "Pulled") || strings.Contains(stderr, "kept in") {
		t.Errorf("the refused seed was reported pulled, or kept to resume from:\n%s%s", stdout, stderr)
	}
	// listTree lists DIR itself first, where the pull made it.
	if left := listTree(t, pulled); len(left) > 1 {
		t.Errorf("the refused pull left in DIR: %v", left[1:])
	}
}
