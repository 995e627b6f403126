package depotfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A depot target is a depot file, a directory or a glob; only blueprints build.
func TestTarget(t *testing.T) {
	dir := t.TempDir()
	bp := func(file, name string) string {
		p := filepath.Join(dir, file)
		os.WriteFile(p, []byte("apiVersion: snofactory.io/v1alpha1\nkind: Blueprint\nmetadata:\n  name: "+name+"\n"), 0o644)
		return p
	}
	a, b, c := bp("a.yaml", "site"), bp("b.yaml", "site"), bp("c.yaml", "other")
	os.WriteFile(filepath.Join(dir, "site.yaml"), []byte("apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\n"), 0o644)
	depotFile := filepath.Join(dir, "depot.yaml")
	os.WriteFile(depotFile, []byte("apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: d\nspec:\n  blueprints: ['*.yaml']\n  parallelBuilds: 2\n"), 0o644)
	for _, target := range []string{dir, filepath.Join(dir, "*.yaml"), depotFile} {
		paths, _, err := Target(target)
		if err != nil || !slices.Equal(paths, []string{a, b, c}) {
			t.Errorf("%s: %v, %v", target, paths, err)
		}
	}
	_, spec, _ := Target(depotFile)
	if spec.ParallelBuilds != 2 {
		t.Errorf("depot file spec %+v", spec)
	}
}
