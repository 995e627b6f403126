package e2e

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// registryBlobs maps each blob in the registry's storage to its size: what it has
// received, whichever client sent it.
func registryBlobs(t *testing.T, storage string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	root := filepath.Join(storage, "docker/registry/v2/blobs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "data" {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[filepath.Base(filepath.Dir(p))] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deltaBlueprint is the demo pushing its seed to a fresh registry of its own, as
// rebuildMovesAsDelta needs it.
func deltaBlueprint(t *testing.T) (bp, ref string, reg *registry.Registry) {
	t.Helper()
	reg = registry.StartT(t, registry.Options{})
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	image := reg.Ref("demo/hello:1.0")
	pushRandom(t, image)
	ref = reg.Ref("demo/seed:1.0")
	bp, err = testbin.CopyDemo(t.TempDir(), map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + iso,
		"push: " + testbin.DemoRegistry + "/demo/seed:1.0": "push: " + ref})
	if err != nil {
		t.Fatal(err)
	}
	return bp, ref, reg
}

// rebuildMovesAsDelta: the demo (bp, from deltaBlueprint) has built and published its
// seed into first with cache; a rebuild whose blueprint changes one Butane file publishes
// again, and the registry receives at most a tenth of the seed's bytes (counted from the
// blobs it stored, and from the uploads its access log shows); a pull of the new seed
// --from the old one fetches little, and gives the sealed files byte for byte.
// TestDemoInstallsAndValidates calls it on its last build: a factory boot of its own
// for the first seed would cost about two minutes under TCG and check nothing more.
func rebuildMovesAsDelta(t *testing.T, reg *registry.Registry, bp, ref, cache, first string) {
	t.Helper()
	second := t.TempDir()
	motd := filepath.Join(filepath.Dir(bp), "demo", "motd.bu")
	b, err := os.ReadFile(motd)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), "from the demo blueprint.", "from the demo blueprint, rebuilt after one change.", 1)
	if changed == string(b) {
		t.Fatal("blueprints/demo/motd.bu no longer says what this test changes")
	}
	if err := os.WriteFile(motd, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	before := registryBlobs(t, reg.StorageDir())
	reg.Reset()
	if r := runCLI(t, "build", bp, "--cache-dir", cache, "--output-dir", second, "--progress", "plain"); r.code != 0 {
		t.Fatalf("rebuild: exit %d\n%s", r.code, r.stderr)
	}
	uploadsSeen := 0
	for _, q := range reg.Requests() {
		// A POST answered 201 mounted a blob the registry had: no bytes, no upload.
		if q.Method == "POST" && q.Kind() == "upload" && q.Status == 202 {
			uploadsSeen++
		}
	}
	var received, newBlobs int64
	for d, n := range registryBlobs(t, reg.StorageDir()) {
		if _, ok := before[d]; !ok {
			received += n
			newBlobs++
		}
	}
	sealed := filepath.Join(second, "seal", "seed")
	var seedBytes int64
	for _, f := range []string{"seed.json", "disk.pack", "disk.index"} {
		fi, err := os.Stat(filepath.Join(sealed, f))
		if err != nil {
			t.Fatal(err)
		}
		seedBytes += fi.Size()
	}
	t.Logf("the rebuild's publish stored %d new blobs, %d bytes, %.1f%% of the seed's %d (%d uploads in the access log)",
		newBlobs, received, 100*float64(received)/float64(seedBytes), seedBytes, uploadsSeen)
	if received == 0 || received > seedBytes/10 {
		t.Errorf("the registry received %d bytes for a one-file change of a %d-byte seed, want at most 10%%", received, seedBytes)
	}
	// Manifests are stored as blobs too, but arrive as manifest PUTs, not uploads.
	if uploadsSeen == 0 || int64(uploadsSeen) > newBlobs {
		t.Errorf("the access log shows %d uploads for %d new blobs", uploadsSeen, newBlobs)
	}

	reg.Reset()
	pulled := filepath.Join(t.TempDir(), "pulled")
	r := runCLI(t, "seed", "pull", "--from", filepath.Join(first, "seal", "seed"), ref, pulled)
	if r.code != 0 || !strings.Contains(r.stdout, "reused ") {
		t.Fatalf("seed pull --from: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Log(strings.TrimSpace(r.stdout))
	if got := reg.Stats().BlobGetBytes; got > seedBytes/5 {
		t.Errorf("pull --from fetched %d blob bytes of a %d-byte seed", got, seedBytes)
	}
	for _, f := range []string{"seed.json", "disk.pack", "disk.index"} {
		if fileDigest(t, filepath.Join(pulled, f)) != fileDigest(t, filepath.Join(sealed, f)) {
			t.Errorf("pulled %s differs from the sealed one", f)
		}
	}
}
