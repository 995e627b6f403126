package precache

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containers/image/v5/types"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/test/check"
	"github.com/snofactory/snofactory/test/registry"
)

// pushImage pushes img to ref and returns the pinned Image.
func pushImage(t *testing.T, ref string, img v1.Image) Image {
	t.Helper()
	pinned := registry.PushT(t, ref, img)
	_, d, _ := strings.Cut(pinned, "@")
	return Image{Name: ref, Ref: pinned, Digest: d}
}

// testImages pushes n images sharing a base layer.
func testImages(t *testing.T, reg *registry.Registry, n int) []Image {
	t.Helper()
	// OCI media types: Debian's skopeo (1.9) finds only OCI-typed manifests in a layout.
	base, err := random.Layer(200<<10, ggcrtypes.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	var out []Image
	for i := 0; i < n; i++ {
		own, err := random.Image(100<<10, 2)
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := own.Layers()
		img, err := mutate.AppendLayers(ociEmpty(), append([]v1.Layer{base}, layers...)...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pushImage(t, reg.Ref("ocp/c"+string(rune('a'+i))+":latest"), img))
	}
	return out
}

func ociEmpty() v1.Image {
	return mutate.ConfigMediaType(mutate.MediaType(empty.Image, ggcrtypes.OCIManifestSchema1), ggcrtypes.OCIConfigJSON)
}

func skopeo(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Fatal("skopeo is missing: install the Debian package skopeo (make deps)")
	}
	out, err := exec.Command("skopeo", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo %v: %v\n%s", args, err, out)
	}
	return out
}

func sysFor(t *testing.T, reg registries.Config) *types.SystemContext {
	t.Helper()
	var cl pipeline.Cleanups
	t.Cleanup(func() { cl.Run() })
	sys, err := registries.SystemContext(context.Background(), t.TempDir(), reg, nil, "x86_64", &cl)
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

func TestPrecacheLayoutAndReuse(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 3)
	st, err := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	sys := sysFor(t, registries.Config{Insecure: []string{reg.Addr()}})
	ctx := context.Background()
	var progressed bool
	res, err := Precache(ctx, Config{Images: images, Store: st, Sys: sys, Jobs: 3,
		Progress: func(what string, done, total int64, unit string) {
			if what == "bytes" && done == total && total > 0 {
				progressed = true
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	// 3 images: shared base + 2 own layers + config each.
	if rep.Blobs != 1+3*3 || rep.BlobsFetched != rep.Blobs || rep.BytesFetched != rep.BytesTotal || rep.BytesReused != 0 {
		t.Errorf("cold report = %+v", rep)
	}
	if !progressed {
		t.Error("no final bytes progress event")
	}
	dir := filepath.Join(t.TempDir(), "layout")
	stats, err := res.WriteLayout(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	if stats.BytesCopied != 0 || stats.Linked != stats.Blobs {
		t.Errorf("layout stats = %+v, want every blob hardlinked", stats)
	}
	for _, im := range images {
		var got struct{ Digest string }
		out := skopeo(t, "inspect", "oci:"+dir+":"+im.Ref)
		json.Unmarshal(out, &got)
		if got.Digest != im.Digest {
			t.Errorf("%s: skopeo sees digest %s, want %s", im.Ref, got.Digest, im.Digest)
		}
	}

	// Warm: nothing comes over the network, not even a manifest.
	reg.Reset()
	res2, err := Precache(ctx, Config{Images: images, Store: st, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	if r := res2.Report; r.BytesFetched != 0 || r.BlobsFetched != 0 || r.ManifestsGot != 0 || r.BytesReused != r.BytesTotal {
		t.Errorf("warm report = %+v", r)
	}
	if s := reg.Stats(); s.BlobGets != 0 || s.ManifestGets != 0 {
		t.Errorf("warm run hit the registry: %+v", s)
	}

	// The layout packs into a data disk the node's reader accepts, naming every image.
	disk := filepath.Join(t.TempDir(), "precache.tar")
	if _, err := precachedisk.Write(ctx, dir, disk, nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	onDisk, err := precachedisk.Extract(ctx, f, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) != len(images) {
		t.Fatalf("disk names %d images, want %d", len(onDisk), len(images))
	}
	for i, im := range onDisk {
		if im.Ref != images[i].Ref || im.Digest.String() != images[i].Digest {
			t.Errorf("disk image %d = %s (%s), want %s (%s)", i, im.Ref, im.Digest, images[i].Ref, images[i].Digest)
		}
	}
}

func TestPrecacheResume(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	big, err := random.Image(4<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	im := pushImage(t, reg.Ref("ocp/big:1"), big)
	layers, _ := big.Layers()
	ld, _ := layers[0].Digest()
	size, _ := layers[0].Size()
	rc, _ := layers[0].Compressed()
	defer rc.Close()
	buf := make([]byte, size)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		partial     []byte
		wantFetched func(int64) bool
	}{
		{"resume from half", buf[:size/2], func(n int64) bool { return n < size }},
		{"garbage partial is refetched", []byte(strings.Repeat("x", int(size/2))), func(n int64) bool { return n > size }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
			if err := os.WriteFile(filepath.Join(st.Dir(), "partial", ld.Hex), tc.partial, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := Precache(context.Background(), Config{Images: []Image{im}, Store: st, Sys: sysFor(t, registries.Config{Insecure: []string{reg.Addr()}}), RetryBase: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !st.Has(digest.Digest(ld.String()), size) {
				t.Fatal("layer not stored")
			}
			if got := res.Report.BytesFetched; !tc.wantFetched(got) {
				t.Errorf("bytes fetched = %d (layer %d, partial %d)", got, size, len(tc.partial))
			}
			if _, err := os.Stat(filepath.Join(st.Dir(), "partial", ld.Hex)); !os.IsNotExist(err) {
				t.Errorf("partial file left behind: %v", err)
			}
		})
	}
}

func TestPrecacheMirrorAndPolicy(t *testing.T) {
	mirror := registry.StartT(t, registry.Options{})
	images := testImages(t, mirror, 1)
	// The images' pinned refs name a registry that does not answer; the mirror has them.
	src := "127.0.0.1:1/ocp"
	for i := range images {
		images[i].Ref = strings.Replace(images[i].Ref, mirror.Addr()+"/ocp", src, 1)
	}
	pol := func(p string) string {
		f := filepath.Join(t.TempDir(), "policy.json")
		os.WriteFile(f, []byte(p), 0o644)
		return f
	}
	tests := []struct {
		name    string
		policy  string
		wantErr string
	}{
		{"mirror", "", ""},
		{"policy accepts", pol(`{"default":[{"type":"insecureAcceptAnything"}]}`), ""},
		{"policy rejects", pol(`{"default":[{"type":"reject"}]}`), "signature policy rejects"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
			sys := sysFor(t, registries.Config{Insecure: []string{mirror.Addr(), "127.0.0.1:1"}, PolicyFile: tc.policy,
				Mirrors: []registries.Mirror{{Source: src, Mirrors: []string{mirror.Addr() + "/ocp"}}}})
			res, err := Precache(context.Background(), Config{Images: images, Store: st, Sys: sys, Attempts: 2, RetryBase: 1})
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if res.Report.BlobsFetched != res.Report.Blobs {
				t.Errorf("report = %+v", res.Report)
			}
		})
	}
}

// secretFiles serves pipeline secrets from files.
type secretFiles map[string]string

func (s secretFiles) Secret(name string) ([]byte, error) { return os.ReadFile(s[name]) }

func TestPrecacheAuth(t *testing.T) {
	reg := registry.StartT(t, registry.Options{Username: "depot", Password: "s3cret"})
	img, err := random.Image(64<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	pinned := registry.PushT(t, reg.Ref("ocp/private:1"), img, ggcrremote.WithAuth(&authn.Basic{Username: "depot", Password: "s3cret"}))
	_, d, _ := strings.Cut(pinned, "@")
	images := []Image{{Name: "private", Ref: pinned, Digest: d}}
	authFile := filepath.Join(t.TempDir(), "auth.json")
	auth := base64.StdEncoding.EncodeToString([]byte("depot:s3cret"))
	os.WriteFile(authFile, []byte(`{"auths":{"`+reg.Addr()+`":{"auth":"`+auth+`"}}}`), 0o600)
	tests := []struct {
		name    string
		secret  string
		wantErr string
	}{
		{"pull secret", "pull-secret", ""},
		{"no credentials", "", "401"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cl pipeline.Cleanups
			defer cl.Run()
			sys, err := registries.SystemContext(context.Background(), t.TempDir(), registries.Config{Insecure: []string{reg.Addr()}, PullSecret: tc.secret}, secretFiles{"pull-secret": authFile}, "x86_64", &cl)
			if err != nil {
				t.Fatal(err)
			}
			// Keep the user's own auth files out of the test.
			if sys.AuthFilePath == "" {
				sys.AuthFilePath = filepath.Join(t.TempDir(), "none.json")
			}
			st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
			res, err := Precache(context.Background(), Config{Images: images, Store: st, Sys: sys, Attempts: 1})
			if check.Error(t, err, tc.wantErr) {
				return
			}
			if res.Report.BlobsFetched != 3 {
				t.Errorf("report = %+v", res.Report)
			}
		})
	}
}

// Two builds precaching the same images at once into one depot store fetch each blob once.
func TestPrecacheConcurrentBuilds(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 4)
	st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	sys := sysFor(t, registries.Config{Insecure: []string{reg.Addr()}})
	var wg sync.WaitGroup
	reps := make([]Report, 2)
	errs := make([]error, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := Precache(context.Background(), Config{Images: images, Store: st, Sys: sys, Jobs: 2})
			errs[i] = err
			if err == nil {
				reps[i] = res.Report
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := reps[0].BlobsFetched+reps[1].BlobsFetched, reps[0].Blobs; got != want {
		t.Errorf("the two builds fetched %d blobs, want each of the %d once", got, want)
	}
	if s := reg.Stats(); int(s.BlobGets) != reps[0].Blobs {
		t.Errorf("registry served %d blob GETs for %d blobs", s.BlobGets, reps[0].Blobs)
	}
}

// A registry that hands blob downloads to another host (a CDN) with a redirect: the Range
// header must survive the redirect, so a partial blob still resumes.
func TestPrecacheFollowsBlobRedirects(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	big, err := random.Image(1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	im := pushImage(t, reg.Ref("ocp/cdn:1"), big)
	target, _ := url.Parse(reg.URL())
	var mu sync.Mutex
	var ranges []string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Error("the CDN got the registry's Authorization header")
		}
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer cdn.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, cdn.URL+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer front.Close()
	frontAddr := strings.TrimPrefix(front.URL, "http://")
	im.Ref = strings.Replace(im.Ref, reg.Addr(), frontAddr, 1)

	layers, _ := big.Layers()
	ld, _ := layers[0].Digest()
	rc, _ := layers[0].Compressed()
	head := make([]byte, 1000)
	io.ReadFull(rc, head)
	rc.Close()
	st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	os.WriteFile(filepath.Join(st.Dir(), "partial", ld.Hex), head, 0o644)
	if _, err := Precache(context.Background(), Config{Images: []Image{im}, Store: st, Sys: sysFor(t, registries.Config{Insecure: []string{frontAddr}})}); err != nil {
		t.Fatal(err)
	}
	if !st.Has(digest.Digest(ld.String()), -1) {
		t.Fatal("layer not stored")
	}
	if !slices.Contains(ranges, "bytes=1000-") {
		t.Errorf("CDN saw ranges %q, want the resume from byte 1000", ranges)
	}
}

func TestStorePrune(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 2)
	st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	sys := sysFor(t, registries.Config{Insecure: []string{reg.Addr()}})
	// Image 0's layout survives; image 1's layout was evicted with its cache entry.
	res0, err := Precache(context.Background(), Config{Images: images[:1], Store: st, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(t.TempDir(), "layout")
	if _, err := res0.WriteLayout(keep, st); err != nil {
		t.Fatal(err)
	}
	res1, err := Precache(context.Background(), Config{Images: images[1:], Store: st, Sys: sys})
	if err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "layout")
	res1.WriteLayout(gone, st)
	os.RemoveAll(gone)
	os.WriteFile(filepath.Join(st.Dir(), "partial", strings.Repeat("0", 64)), []byte("stale"), 0o644)

	ps, err := st.Prune(context.Background(), blobstore.PruneOptions{Unlinked: true})
	if err != nil {
		t.Fatal(err)
	}
	// Image 1 has its own config, two own layers and its manifest; the base layer is shared.
	if ps.Blobs != 4 || ps.Partials != 1 {
		t.Errorf("pruned %+v, want image 1's 4 own blobs and the stale partial", ps)
	}
	// What the surviving layout needs is all there.
	blobs, _ := filepath.Glob(filepath.Join(keep, "blobs", "sha256", "*"))
	for _, b := range blobs {
		if !st.Has(digest.NewDigestFromEncoded(digest.SHA256, filepath.Base(b)), -1) {
			t.Errorf("pruned blob %s that a layout still links", filepath.Base(b))
		}
	}
}

// A dead mirror hands over to the source at once instead of being retried for every blob.
func TestPrecacheDeadMirror(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 3)
	st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	sys := sysFor(t, registries.Config{Insecure: []string{reg.Addr(), "127.0.0.1:1"},
		Mirrors: []registries.Mirror{{Source: reg.Addr() + "/ocp", Mirrors: []string{"127.0.0.1:1/ocp"}}}})
	res, err := Precache(context.Background(), Config{Images: images, Store: st, Sys: sys, RetryBase: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Every backoff wait is a counted retry: none means the dead mirror cost no waiting.
	if res.Report.Retries != 0 {
		t.Errorf("the dead mirror was retried %d times instead of skipped: %+v", res.Report.Retries, res.Report)
	}
	if res.Report.BlobsFetched != res.Report.Blobs {
		t.Errorf("report = %+v", res.Report)
	}
}

// A mirror that is up but throttles (503 with a Retry-After) is asked as often as the one
// retry policy says, for each manifest and blob, then the next mirror serves the image.
func TestPrecacheThrottledMirror(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	images := testImages(t, reg, 1)
	var asked atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return // the ping: the registry is there
		}
		asked.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer busy.Close()
	busyAddr := strings.TrimPrefix(busy.URL, "http://")
	src := "127.0.0.1:1/ocp"
	for i := range images {
		images[i].Ref = strings.Replace(images[i].Ref, reg.Addr()+"/ocp", src, 1)
	}
	st, _ := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
	sys := sysFor(t, registries.Config{Insecure: []string{busyAddr, reg.Addr(), "127.0.0.1:1"},
		Mirrors: []registries.Mirror{{Source: src, Mirrors: []string{busyAddr + "/ocp", reg.Addr() + "/ocp"}}}})
	const attempts = 3
	// RetryMax bounds the Retry-After, so the test does not wait its second.
	res, err := Precache(context.Background(), Config{Images: images, Store: st, Sys: sys, Attempts: attempts, RetryMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	objects := int64(1 + res.Report.Blobs) // the manifest and every blob
	if got := asked.Load(); got != attempts*objects {
		t.Errorf("the throttling mirror was asked %d times, want %d tries for each of %d objects", got, attempts, objects)
	}
	if res.Report.Retries != (attempts-1)*objects || res.Report.BlobsFetched != res.Report.Blobs {
		t.Errorf("report = %+v, want %d retries and every blob fetched from the next mirror", res.Report, (attempts-1)*objects)
	}
}
