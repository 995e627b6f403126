package depotfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.yaml", "b.yaml"} {
		os.WriteFile(filepath.Join(dir, n), []byte("kind: Blueprint\n"), 0o644)
	}
	write := func(doc string) string {
		p := filepath.Join(dir, "depot.yaml")
		os.WriteFile(p, []byte(doc), 0o644)
		return p
	}
	good := "apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: d\nspec:\n  blueprints: ['*.yaml', a.yaml]\n  slots:\n    vms: 2\n    memory: 8GiB\n  minFreeDisk: 10GiB\n"
	d, err := Load(write(good))
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Slots.VMs != 2 || d.Spec.Slots.Memory.MiB() != 8192 || d.Spec.MinFreeDisk.MiB() != 10240 {
		t.Errorf("spec %+v", d.Spec)
	}
	// depot.yaml itself matches *.yaml: the caller filters by kind; each file once, in order.
	paths, err := d.BlueprintPaths()
	if err != nil || !slices.Equal(paths, []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "depot.yaml")}) {
		t.Errorf("paths %v, %v", paths, err)
	}
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown key":  {strings.Replace(good, "slots:", "slotz:", 1), "depot.yaml:7:3: spec.slotz: unknown field"},
		"no blueprint": {"apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: d\nspec:\n  blueprints: []\n", "spec.blueprints: names no blueprint"},
		"negative":     {strings.Replace(good, "vms: 2", "vms: -1", 1), "spec.slots.vms: must be at least 1, got -1"},
		// Zero is refused as --parallel 0 is, not taken for "the default".
		"zero parallel": {strings.Replace(good, "minFreeDisk", "parallelBuilds: 0\n  minFreeDisk", 1), "spec.parallelBuilds: must be at least 1, got 0"},
		"zero attempts": {strings.Replace(good, "minFreeDisk", "attempts: 0\n  minFreeDisk", 1), "spec.attempts: must be at least 1, got 0"},
		"zero cpus":     {strings.Replace(good, "vms: 2", "vms: 2\n    cpus: 0", 1), "spec.slots.cpus: must be at least 1, got 0"},
		"bad size":      {strings.Replace(good, "10GiB", "ten", 1), "spec.minFreeDisk"},
	} {
		if _, err := Load(write(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Expand(dir, []string{"nothing-*.yaml"}); err == nil || !strings.Contains(err.Error(), "matches no blueprint") {
		t.Errorf("empty glob: %v", err)
	}
}
