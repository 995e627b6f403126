package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/test/registry"
)

// pushRandom pushes a small random image to ref (only its digest matters to these tests).
func pushRandom(t *testing.T, ref string) {
	t.Helper()
	if _, err := registry.PushRandom(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
}

// TestLockedBuildRefusesMovedTag: lock pins the extra image; after its tag moves, build
// --locked fails with exit 1 and names the image whose digest changed.
func TestLockedBuildRefusesMovedTag(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	ref := reg.Ref("site/agent:1.0")
	pushRandom(t, ref)

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "live.iso"), []byte("stand-in ISO bytes: resolve only hashes it"), 0o644)
	bp := filepath.Join(dir, "appliance.yaml")
	os.WriteFile(bp, []byte(`apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: appliance
spec:
  target:
    type: coreos
  source:
    path: live.iso
  extraImages:
    - `+ref+`
`), 0o644)

	if r := runCLI(t, "build", bp, "--locked", "--until", "resolve", "--cache-dir", t.TempDir(), "--output-dir", t.TempDir()); r.code != 2 || !strings.Contains(r.stderr, "snofactory lock") {
		t.Fatalf("--locked without a lock: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := runCLI(t, "lock", bp); r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.stderr)
	}
	lockFile := filepath.Join(dir, "appliance.lock.json")
	b, err := os.ReadFile(lockFile)
	if err != nil || !strings.Contains(string(b), "@sha256:") || !strings.Contains(string(b), `"path": "live.iso"`) {
		t.Fatalf("lock file: %s %v", b, err)
	}
	cache := t.TempDir()
	if r := runCLI(t, "build", bp, "--locked", "--until", "resolve", "--cache-dir", cache, "--output-dir", t.TempDir()); r.code != 0 {
		t.Fatalf("locked build with a matching lock: exit %d: %s", r.code, r.stderr)
	}

	pushRandom(t, ref) // the tag now points at another image
	r := runCLI(t, "build", bp, "--locked", "--until", "resolve", "--cache-dir", t.TempDir(), "--output-dir", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "site/agent") || !strings.Contains(r.stderr, "stage resolve failed") {
		t.Fatalf("moved tag: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
