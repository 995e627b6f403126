package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/badinput"
)

// readOnlyDir is an existing directory this process cannot write: mode 0555, or for root
// (whom mode bits do not stop) a read-only bind mount of it.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("running as root and cannot bind-mount a read-only directory: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("running as root and cannot remount a directory read-only: %v", err)
	}
	return dir
}

// unavailableGraph is a → b → c → d where c is not implemented in this version; d is, but
// needs c.
func unavailableGraph() *Graph {
	g := newTestGraph().graph()
	g.Stages = append(g.Stages, Stage{Name: "d", Version: "1", Deps: []string{"c"}, Run: func(context.Context, *Env) error { return nil }})
	g.Stages[2].Unavailable = "not implemented in this version"
	g.Stages[2].Run = nil
	return g
}

// TestBuildRefusesBadInputBeforeTouchingDisk: a build whose selection or directories are wrong
// is an *badinput.Error, runs no stage, and creates neither the output nor the cache directory.
func TestBuildRefusesBadInputBeforeTouchingDisk(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, cache := filepath.Join(tmp, "out"), filepath.Join(tmp, "cache")
	tests := []struct {
		name       string
		graph      func() *Graph
		sel        Selection
		out, cache string
		msg        string
	}{
		{"until no such stage", newTestGraph().graph, Selection{Until: "bogus"}, out, cache, "--until bogus: no such stage"},
		{"force no such stage", newTestGraph().graph, Selection{Force: []string{"bogus"}}, out, cache, "--force bogus"},
		{"output dir is a file", newTestGraph().graph, Selection{}, file, cache, "output directory " + file + " is a file"},
		{"output dir below a file", newTestGraph().graph, Selection{}, filepath.Join(file, "out"), cache, "not a directory"},
		{"cache dir is a file", newTestGraph().graph, Selection{}, out, file, "cache directory " + file + " is a file"},
		{"cache dir read-only", newTestGraph().graph, Selection{}, out, "", "is not writable"},
		{"until an unavailable stage", unavailableGraph, Selection{Until: "c"}, out, cache, "stage c is unavailable: not implemented in this version; build with --until b to stop before it"},
		{"all stages, one unavailable", unavailableGraph, Selection{}, out, cache, "stage c is unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cache == "" {
				tt.cache = filepath.Join(readOnlyDir(t), "cache")
			}
			g := tt.graph()
			ran := false
			for i := range g.Stages {
				if g.Stages[i].Run != nil {
					g.Stages[i].Run = func(context.Context, *Env) error { ran = true; return nil }
				}
			}
			_, err := Build(context.Background(), g, BuildOptions{Cache: &Cache{Dir: tt.cache}, OutputDir: tt.out, Selection: tt.sel})
			var ie *badinput.Error
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v (%T), want an *badinput.Error containing %q", err, err, tt.msg)
			}
			if ran {
				t.Error("a stage ran")
			}
			for _, p := range []string{out, cache} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created (%v)", p, err)
				}
			}
		})
	}
}

// TestPlanShowsUnavailableStages: a stage this version cannot run, and every stage after it
// that needs it, plans as "unavailable" with the reason, never as "run".
func TestPlanShowsUnavailableStages(t *testing.T) {
	for _, sel := range []Selection{{}, {Until: "c"}, {Until: "a"}} {
		plan, err := Plan(context.Background(), unavailableGraph(), &Cache{Dir: t.TempDir()}, nil, sel)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range plan {
			got[p.Name] = p.Action + ": " + strings.Join(p.Reasons, "; ")
		}
		for stage, want := range map[string]string{
			"c": "unavailable: not implemented in this version",
			"d": "unavailable: needs stage c, which is unavailable",
		} {
			if got[stage] != want {
				t.Errorf("until %q: %s plans as %q, want %q", sel.Until, stage, got[stage], want)
			}
		}
		if !strings.HasPrefix(got["a"], "run") {
			t.Errorf("until %q: a plans as %q", sel.Until, got["a"])
		}
	}
}

// TestPlanRefusesACacheThatIsAFile: the cache directory argument is checked like a build's.
func TestPlanRefusesACacheThatIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Plan(context.Background(), newTestGraph().graph(), &Cache{Dir: file}, nil, Selection{})
	var ie *badinput.Error
	if !errors.As(err, &ie) {
		t.Fatalf("got %v (%T), want an *badinput.Error", err, err)
	}
}
