package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A depot target that does not exist, and a directory with no depot, are the user's input.
// (How builds are named is pipeline/depot's TestPreloadedBuilds.)
func TestDepotTarget(t *testing.T) {
	if code, _, stderr := runMain(t, "depot", "run", filepath.Join(t.TempDir(), "none")); code != exitBadInput {
		t.Errorf("missing target: exit %d: %s", code, stderr)
	}
	if code, _, _ := runMain(t, "depot", "status", t.TempDir()); code != exitBadInput {
		t.Errorf("status of a directory with no depot: exit %d", code)
	}
}

// Bad input to a depot is refused before anything runs: nonsense counts, and blueprints
// that do not validate (every problem of every one printed with its position). depot
// status exits 1 for a depot that failed or whose process is gone.
func TestDepotRefusesBeforeRunning(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: snofactory.io/v1alpha1\nkind: Blueprint\nmetadata:\n  name: bad\nspec:\n  target:\n    type: windows\n"), 0o644)
	demo, _ := os.ReadFile("../../blueprints/demo.yaml")
	os.WriteFile(filepath.Join(dir, "demo.yaml"), demo, 0o644)
	out, cache := filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "cache")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"depot", "run", dir, "--parallel", "0"}, "--parallel 0: want at least 1"},
		{[]string{"depot", "run", dir, "--vms", "-1"}, "--vms -1: want at least 1"},
		{[]string{"depot", "run", dir, "--attempts", "0"}, "--attempts 0: want at least 1"},
		{[]string{"depot", "run", dir, "--output-dir", out, "--cache-dir", cache}, bad + ":7:11: spec.target.type"},
	} {
		code, _, stderr := runMain(t, tc.args...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	for _, p := range []string{out, cache} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a refused depot", p)
		}
	}

	status := t.TempDir()
	for want, doc := range map[int]string{
		exitOK:     `{"status":"succeeded","started":"2026-01-01T00:00:00Z","builds":[]}`,
		exitFailed: `{"status":"failed","started":"2026-01-01T00:00:00Z","builds":[]}`,
	} {
		os.WriteFile(filepath.Join(status, "depot.json"), []byte(doc), 0o644)
		if code, _, stderr := runMain(t, "depot", "status", status); code != want {
			t.Errorf("status %s: exit %d, want %d: %s", doc, code, want, stderr)
		}
	}
	os.WriteFile(filepath.Join(status, "depot.json"), []byte(`{"status":"running","started":"2026-01-01T00:00:00Z","builds":[]}`), 0o644)
	if code, _, stderr := runMain(t, "depot", "status", status); code != exitFailed || !strings.Contains(stderr, "interrupted") {
		t.Errorf("a running status nobody holds: exit %d, %q; want 1 and interrupted", code, stderr)
	}
}
