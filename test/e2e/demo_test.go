package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
)

// demoBlueprint copies the demo blueprint, points it at the conformance ISO and at an
// extra image pushed to a fresh local registry, and returns its path.
func demoBlueprint(t *testing.T) string {
	t.Helper()
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.StartT(t, registry.Options{})
	image := reg.Ref("demo/hello:1.0")
	pushRandom(t, image)
	bp := copyDemo(t)
	b, err := os.ReadFile(bp)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for old, repl := range map[string]string{
		"127.0.0.1:5055/demo/hello:1.0":              image,
		"path: ../build/conformance/conformance.iso": "path: " + iso,
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("demo.yaml no longer contains %q", old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	if err := os.WriteFile(bp, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return bp
}

// TestDemoBuildsThroughPrecache runs the demo's pipeline up to precache for real and checks
// the products: the install ISO carries exactly the rendered config, the precache layout
// holds the extra image, and a second build is all cache hits.
func TestDemoBuildsThroughPrecache(t *testing.T) {
	bp := demoBlueprint(t)
	cache, out := t.TempDir(), t.TempDir()
	r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out, "--progress", "json")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	// --progress json is an RFC 7464 sequence: every record starts with RS.
	for _, rec := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(rec, "\x1e{") {
			t.Fatalf("not a JSON text sequence record: %q", rec)
		}
	}
	rec := loadRecord(t, out)
	want := []string{"resolve", "render", "live-iso", "precache"}
	if len(rec.Stages) != len(want) {
		t.Fatalf("stages: %+v", rec.Stages)
	}
	for i, s := range rec.Stages {
		if s.Name != want[i] || s.Cache != "miss" || len(s.Artifacts) == 0 {
			t.Errorf("stage %d: %+v", i, s)
		}
	}

	shown := runCLI(t, "iso", "show", filepath.Join(out, "live-iso", "live.iso"))
	rendered, err := os.ReadFile(filepath.Join(out, "render", "ignition", "config.ign"))
	if err != nil || shown.code != 0 || !bytes.Equal(bytes.TrimSpace([]byte(shown.stdout)), bytes.TrimSpace(rendered)) {
		t.Fatalf("the install ISO does not carry the rendered config (exit %d, %v)", shown.code, err)
	}
	if _, err := os.Stat(filepath.Join(out, "precache", "layout", "index.json")); err != nil {
		entries, _ := os.ReadDir(filepath.Join(out, "precache"))
		t.Fatalf("precache layout missing: %v (outputs: %v)", err, entries)
	}

	out2 := t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "precache", "--cache-dir", cache, "--output-dir", out2); r.code != 0 {
		t.Fatalf("second build: %s", r.stderr)
	}
	for _, s := range loadRecord(t, out2).Stages {
		if s.Cache != "hit" {
			t.Errorf("second build: %s was %s", s.Name, s.Cache)
		}
	}
}
