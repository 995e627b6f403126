package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A depot target is a depot file, a directory or a glob; only blueprints build, each named
// by its metadata.name, made unique.
func TestDepotTarget(t *testing.T) {
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
		paths, _, err := depotTarget(target)
		if err != nil || !slices.Equal(paths, []string{a, b, c}) {
			t.Errorf("%s: %v, %v", target, paths, err)
		}
	}
	_, spec, _ := depotTarget(depotFile)
	if spec.ParallelBuilds != 2 {
		t.Errorf("depot file spec %+v", spec)
	}
	var names []string
	for _, bd := range depotBuilds([]string{a, b, c}) {
		names = append(names, bd.Name)
	}
	if strings.Join(names, ",") != "site,site-2,other" {
		t.Errorf("names %v", names)
	}
	if code, _, stderr := runMain(t, "depot", "run", filepath.Join(t.TempDir(), "none")); code != exitBadInput {
		t.Errorf("missing target: exit %d: %s", code, stderr)
	}
	if code, _, _ := runMain(t, "depot", "status", t.TempDir()); code != exitBadInput {
		t.Errorf("status of a directory with no depot: exit %d", code)
	}
}
