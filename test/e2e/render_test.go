package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// TestRenderDemoIsValidAndReproducible: the demo's rendered Ignition passes Debian's
// ignition-validate (an independent oracle), and two renders give identical bytes.
func TestRenderDemoIsValidAndReproducible(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("ignition-validate"); err != nil {
		t.Fatal("ignition-validate not found: install the Debian package ignition (make deps does)")
	}
	demo := filepath.Join(root, "blueprints", "demo.yaml")
	outs := []string{t.TempDir(), t.TempDir()}
	for _, out := range outs {
		if r := runCLI(t, "render", demo, "-o", out); r.code != 0 {
			t.Fatalf("render: exit %d: %s", r.code, r.stderr)
		}
	}
	cfg := filepath.Join(outs[0], "ignition", "config.ign")
	if b, err := exec.Command("ignition-validate", cfg).CombinedOutput(); err != nil {
		t.Fatalf("ignition-validate %s: %v\n%s", cfg, err, b)
	}
	var files int
	filepath.Walk(outs[0], func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		files++
		rel, _ := filepath.Rel(outs[0], p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(outs[1], rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two renders", rel)
		}
		return nil
	})
	if files < 2 {
		t.Fatalf("render wrote %d files", files)
	}
}
