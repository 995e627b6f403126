package ociseed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// chunk is small so a 3 MiB disk has many chunks.
const chunk = 256 << 10

// opts are the options of most tests here, which move chunk groups as blobs of their own
// (packTests move packs).
func opts(extra ...ociseed.Option) []ociseed.Option {
	return append([]ociseed.Option{ociseed.WithChunkSize(chunk), ociseed.WithKeychain(authn.NewMultiKeychain()), ociseed.WithGroupBlobs()}, extra...)
}

func skopeo(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testbin.Require(t, "skopeo", "skopeo"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sameFiles fails unless every file of the seed in a is byte-identical in b.
func sameFiles(t *testing.T, a, b string, m *seed.Manifest) {
	t.Helper()
	names := []string{seed.ManifestFile}
	for _, d := range m.Disks {
		names = append(names, d.File)
		if d.Index != nil {
			names = append(names, d.Index.File)
		}
	}
	if m.Credentials != nil {
		names = append(names, m.Credentials.File)
	}
	if m.SBOM != nil {
		names = append(names, m.SBOM.File)
	}
	for _, n := range names {
		x, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs after the round trip", n)
		}
	}
}

// uploads counts the blob uploads the registry started (POST .../blobs/uploads/).
func uploads(reqs []registry.Request) int { return posts(reqs, http.StatusAccepted) }

// posts counts the POSTs to blob uploads answered with status: 202 opened an upload, 201
// mounted a blob the repository had.
func posts(reqs []registry.Request, status int) int {
	n := 0
	for _, q := range reqs {
		if q.Method == http.MethodPost && q.Kind() == "upload" && q.Status == status {
			n++
		}
	}
	return n
}

func TestRegistryRoundTrip(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	// Files only: a chunked disk has the layout of delta_test.go.
	m := seedtest.Write(t, src, seedtest.Options{Credentials: true, SBOM: true, Formats: []string{seed.FormatQCOW2, seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	ctx := context.Background()

	res, err := ociseed.Push(ctx, src, ref, opts(ociseed.WithJobs(3), ociseed.WithSource("https://git.example/depot"))...)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != res.Bytes || res.Blobs < 10 {
		t.Errorf("first push sent %d of %d bytes in %d blobs", res.Sent, res.Bytes, res.Blobs)
	}

	// skopeo, an independent client, sees a well-formed OCI 1.1 artifact.
	raw := skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+ref)
	var man ocispec.Manifest
	if err := json.Unmarshal([]byte(raw), &man); err != nil {
		t.Fatal(err)
	}
	if digest.FromString(raw) != res.Digest {
		t.Errorf("skopeo sees manifest %s, pushed %s", digest.FromString(raw), res.Digest)
	}
	if man.ArtifactType != seed.ArtifactType || man.Config.MediaType != seed.MediaTypeManifest || man.MediaType != ocispec.MediaTypeImageManifest {
		t.Errorf("artifactType %q config %q mediaType %q", man.ArtifactType, man.Config.MediaType, man.MediaType)
	}
	for k, v := range map[string]string{ocispec.AnnotationTitle: "demo", ocispec.AnnotationCreated: "2025-01-02T03:04:05Z",
		ocispec.AnnotationSource: "https://git.example/depot", ociseed.AnnotationTarget: "coreos"} {
		if man.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, man.Annotations[k], v)
		}
	}
	l := man.Layers[1]
	if l.Annotations[ocispec.AnnotationTitle] != "disk.qcow2" && l.Annotations[ocispec.AnnotationTitle] != "disk.raw.zst" ||
		l.Annotations[ociseed.AnnotationChunkIndex] != "1" || l.Annotations[ociseed.AnnotationChunkOffset] != "262144" {
		t.Errorf("second layer annotations %v", l.Annotations)
	}
	if n := len(man.Layers); man.Layers[n-2].MediaType != ociseed.MediaTypeCredentials ||
		man.Layers[n-1].MediaType != ociseed.MediaTypeSBOM || man.Layers[n-1].Annotations[ocispec.AnnotationTitle] != seedtest.SBOMFile {
		t.Errorf("last layers %v, want the credentials, then the SBOM", man.Layers[n-2:])
	}

	dst := filepath.Join(t.TempDir(), "pulled")
	got, err := ociseed.Pull(ctx, ref, dst, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if got.Disks[0].RawDigest != m.Disks[0].RawDigest {
		t.Errorf("pulled manifest %v", got.Disks)
	}
	sameFiles(t, src, dst, m)
	if entries, _ := os.ReadDir(dst); len(entries) != 5 {
		t.Errorf("pull left %d entries in %s, want the 5 files", len(entries), dst)
	}

	insp, err := ociseed.Inspect(ctx, ref, opts()...)
	if err != nil || insp.Name != "demo" || insp.LockDigest != m.LockDigest {
		t.Errorf("Inspect = %+v, %v", insp, err)
	}
}

// TestRepushSendsNothing: pushing an unchanged seed stored as files again uploads no blob,
// as the registry's access log shows (a chunked seed: TestDeltaRoundTrip).
func TestRepushSendsNothing(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatQCOW2, seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	first, err := ociseed.Push(context.Background(), src, ref, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	r.Reset()
	again, err := ociseed.Push(context.Background(), src, r.Ref("seeds/demo:v2"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	reqs := r.Requests()
	if n := uploads(reqs); n != 0 || again.Sent != 0 {
		t.Errorf("re-push started %d uploads and sent %d bytes, want 0", n, again.Sent)
	}
	// One request a blob: the registry mounts, so each blob's POST finds it (and the first
	// blob, which proves the mounting, is HEADed too).
	if s, m := registry.Summarize(reqs), posts(reqs, http.StatusCreated); m != again.Blobs || s.BlobHeads != 1 {
		t.Errorf("re-push of %d blobs: %d mounts and %d blob HEADs, want %d and 1", again.Blobs, m, s.BlobHeads, again.Blobs)
	}
	if again.Digest != first.Digest {
		t.Errorf("same seed, different manifests: %s, %s", first.Digest, again.Digest)
	}
}

// TestPushResumes cancels a push after some chunks and re-runs it: the re-run uploads only
// the chunks that had not finished, and finds the others already there.
func TestPushResumes(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	const stopAfter = 4

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	done := map[digest.Digest]bool{}
	_, err := ociseed.Push(ctx, src, ref, opts(ociseed.WithJobs(1), ociseed.WithProgress(func(p ociseed.Progress) {
		mu.Lock()
		defer mu.Unlock()
		done[p.Digest] = true
		if p.Done == stopAfter {
			cancel()
		}
	}))...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled push = %v", err)
	}
	r.Reset()

	var skipped []digest.Digest
	res, err := ociseed.Push(context.Background(), src, ref, opts(ociseed.WithProgress(func(p ociseed.Progress) {
		if p.Moved == 0 {
			skipped = append(skipped, p.Digest)
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := uploads(r.Requests()), res.Blobs-stopAfter; n != want {
		t.Errorf("the resumed push started %d uploads, want %d (%d blobs, %d finished before)", n, want, res.Blobs, stopAfter)
	}
	for d := range done {
		if !contains(skipped, d) {
			t.Errorf("chunk %s finished in the first push but was sent again", d)
		}
	}
	if _, err := ociseed.Pull(context.Background(), ref, t.TempDir(), opts()...); err != nil {
		t.Fatalf("pull after the resumed push: %v", err)
	}
}

func contains(l []digest.Digest, d digest.Digest) bool {
	for _, x := range l {
		if x == d {
			return true
		}
	}
	return false
}

// TestPullDetectsCorruptBlob corrupts a chunk in the registry's storage: the pull fails
// naming that chunk, and leaves no seed.json behind.
func TestPullDetectsCorruptBlob(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	if _, err := ociseed.Push(context.Background(), src, ref, opts()...); err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	json.Unmarshal([]byte(skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+ref)), &man)
	bad := man.Layers[2].Digest
	p := filepath.Join(r.StorageDir(), "docker/registry/v2/blobs/sha256", bad.Encoded()[:2], bad.Encoded(), "data")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	_, err = ociseed.Pull(context.Background(), ref, dst, opts()...)
	if err == nil || !strings.Contains(err.Error(), "disk.raw.zst chunk 2") || !strings.Contains(err.Error(), bad.String()) {
		t.Fatalf("Pull = %v, want an error naming disk.raw.zst chunk 2 (%s)", err, bad)
	}
	t.Log(err)
	if _, err := os.Stat(filepath.Join(dst, seed.ManifestFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed pull left seed.json: %v", err)
	}
}

// TestPullResumes interrupts a pull after some chunks; the next pull fetches only the rest.
func TestPullResumes(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	m := seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatQCOW2}})
	ref := r.Ref("seeds/demo:v1")
	res, err := ociseed.Push(context.Background(), src, ref, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	_, err = ociseed.Pull(ctx, ref, dst, opts(ociseed.WithJobs(1), ociseed.WithProgress(func(p ociseed.Progress) {
		if p.Done == 3 {
			cancel()
		}
	}))...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull = %v", err)
	}
	r.Reset()
	if _, err := ociseed.Pull(context.Background(), ref, dst, opts()...); err != nil {
		t.Fatal(err)
	}
	// res.Blobs counts the config too, which each pull reads.
	if got, want := registry.Summarize(r.Requests()).BlobGets, res.Blobs-3; got != want {
		t.Errorf("the resumed pull fetched %d blobs, want %d", got, want)
	}
	sameFiles(t, src, dst, m)
}

func TestArchiveAndLayoutRoundTrip(t *testing.T) {
	src := t.TempDir()
	m := seedtest.Write(t, src, seedtest.Options{Credentials: true, SBOM: true})
	report := filepath.Join(t.TempDir(), "validation.json")
	os.WriteFile(report, []byte(`{"passed":3}`), 0o644)
	const reportType = "application/vnd.snofactory.validation.v1+json"
	tmp := t.TempDir()
	for _, loc := range []string{"oci-archive:" + filepath.Join(tmp, "seed.tar") + ":v1", "oci:" + filepath.Join(tmp, "layout") + ":v1"} {
		t.Run(strings.SplitN(loc, ":", 2)[0], func(t *testing.T) {
			ctx := context.Background()
			res, err := ociseed.Push(ctx, src, loc, opts(ociseed.WithReferrers(ociseed.Referrer{File: report, ArtifactType: reportType}))...)
			if err != nil {
				t.Fatal(err)
			}
			// skopeo reads the same transport names.
			raw := skopeo(t, "inspect", "--raw", loc)
			if digest.FromString(raw) != res.Digest {
				t.Errorf("skopeo sees %s, pushed %s", digest.FromString(raw), res.Digest)
			}
			dst := t.TempDir()
			if _, err := ociseed.Pull(ctx, loc, dst, opts()...); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, src, dst, m)
			refs, err := ociseed.Referrers(ctx, loc, reportType, opts()...)
			if err != nil || len(refs) != 1 || refs[0].Digest != res.Referrers[0] {
				t.Errorf("Referrers = %v, %v; pushed %v", refs, err, res.Referrers)
			}
			// A second push of the same seed into the layout writes nothing new.
			if !strings.HasPrefix(loc, "oci:") {
				return
			}
			again, err := ociseed.Push(ctx, src, loc, opts()...)
			if err != nil || again.Sent != 0 {
				t.Errorf("re-push into the layout sent %d bytes, %v", again.Sent, err)
			}
		})
	}
}

func TestAttachReferrer(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	ctx := context.Background()
	res, err := ociseed.Push(ctx, src, ref, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "run.json")
	os.WriteFile(run, []byte(`{"stages":[]}`), 0o644)
	const runType = "application/vnd.snofactory.run.v1+json"
	d, err := ociseed.AttachReferrer(ctx, ref, run, runType, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := ociseed.Referrers(ctx, ref, runType, opts()...)
	if err != nil || len(refs) != 1 || refs[0].Digest != d {
		t.Fatalf("Referrers = %v, %v; attached %s", refs, err, d)
	}
	var man ocispec.Manifest
	raw := skopeo(t, "inspect", "--raw", "--tls-verify=false", "docker://"+r.Ref("seeds/demo@"+d.String()))
	if err := json.Unmarshal([]byte(raw), &man); err != nil {
		t.Fatal(err)
	}
	if man.Subject == nil || man.Subject.Digest != res.Digest || man.ArtifactType != runType {
		t.Errorf("the attached manifest: subject %v, artifactType %q", man.Subject, man.ArtifactType)
	}
	if _, err := ociseed.AttachReferrer(ctx, "oci-archive:"+filepath.Join(t.TempDir(), "x.tar"), run, runType); err == nil {
		t.Error("attaching to an oci-archive succeeded")
	}
}

func TestPushRefusesChangedDisk(t *testing.T) {
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	p := filepath.Join(src, "disk.raw.zst")
	b, _ := os.ReadFile(p)
	b[len(b)-10] ^= 1
	os.WriteFile(p, b, 0o644)
	layout := filepath.Join(t.TempDir(), "layout")
	_, err := ociseed.Push(context.Background(), src, "oci:"+layout, opts()...)
	var mm *seed.MismatchError
	if !errors.As(err, &mm) || mm.File != "disk.raw.zst" {
		t.Fatalf("Push = %v, want a digest mismatch of disk.raw.zst", err)
	}
	if _, err := os.Stat(filepath.Join(layout, "index.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a manifest was written for a broken seed")
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct{ in, transport, path, tag, ref string }{
		{"oci:/tmp/x", ociseed.TransportLayout, "/tmp/x", "latest", ""},
		{"oci:/tmp/x:v2", ociseed.TransportLayout, "/tmp/x", "v2", ""},
		{"oci-archive:seed.tar:v1", ociseed.TransportOCIArchive, "seed.tar", "v1", ""},
		{"docker://127.0.0.1:5000/seeds/demo:v1", ociseed.TransportRegistry, "", "", "127.0.0.1:5000/seeds/demo:v1"},
		{"quay.io/depot/seed@sha256:" + strings.Repeat("a", 64), ociseed.TransportRegistry, "", "", "quay.io/depot/seed@sha256:" + strings.Repeat("a", 64)},
	} {
		l, err := ociseed.ParseLocation(tc.in, false)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		ref := ""
		if l.Ref != nil {
			ref = l.Ref.String()
		}
		if l.Transport != tc.transport || l.Path != tc.path || l.Tag != tc.tag || ref != tc.ref {
			t.Errorf("%s: %+v", tc.in, l)
		}
	}
	for _, bad := range []string{"oci:", "UPPER/case:v1", "oci-archive::v1"} {
		if _, err := ociseed.ParseLocation(bad, false); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// A pulled seed is verified where it was staged; one whose content is not what its
// manifest says (here a manifest that lies about the raw disk, pushed to a layout) fails
// without leaving a seed.json, the disk or the staging directory in DIR.
func TestPullLeavesNoSeedThatLooksValid(t *testing.T) {
	src := t.TempDir()
	m := seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	m.Disks[0].RawDigest = m.Disks[0].Digest // well-formed, wrong
	if err := seed.WriteManifest(src, m); err != nil {
		t.Fatal(err)
	}
	loc := "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"
	if _, err := ociseed.Push(context.Background(), src, loc, opts()...); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	_, err := ociseed.Pull(context.Background(), loc, dst, opts()...)
	if err == nil || !strings.Contains(err.Error(), "raw digest mismatch") {
		t.Fatalf("Pull = %v, want the raw digest mismatch", err)
	}
	if left, _ := os.ReadDir(dst); len(left) != 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("a failed pull left %v in %s", names, dst)
	}
}

// A seed directory whose disk is a symlink to a host file is refused before anything is
// sent: no host byte reaches the registry or layout.
func TestPushRefusesCraftedSeed(t *testing.T) {
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatRaw}})
	host := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(host, []byte("HOST-ONLY"), 0o600)
	os.Remove(filepath.Join(src, "disk.raw.zst"))
	os.Symlink(host, filepath.Join(src, "disk.raw.zst"))
	layout := filepath.Join(t.TempDir(), "layout")
	_, err := ociseed.Push(context.Background(), src, "oci:"+layout+":v1", opts()...)
	if !errors.Is(err, seed.ErrBadSeed) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("Push = %v, want the symlink refused", err)
	}
	if _, err := os.Stat(layout); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused push created %s", layout)
	}
}
