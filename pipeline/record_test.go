package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordSaysRunningMidBuild reads run.json from inside each stage: while the build runs
// the record says "running", has no finish time and lists exactly the stages finished so far,
// so a build killed there leaves a record that says so.
func TestRecordSaysRunningMidBuild(t *testing.T) {
	out := t.TempDir()
	// The output directory holds the record of an earlier, successful build.
	old := &Record{Blueprint: "rec", Status: StatusSucceeded}
	if err := old.write(filepath.Join(out, RecordFile)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]*Record{}
	probe := func(name string) Stage {
		return Stage{Name: name, Version: "1", Run: func(ctx context.Context, env *Env) error {
			b, err := os.ReadFile(filepath.Join(out, RecordFile))
			if err != nil {
				return err
			}
			if seen[name], err = ReadRecord(b); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.Out, "f"), []byte(name), 0o644)
		}}
	}
	g := &Graph{Blueprint: "rec", Stages: []Stage{probe("a"), probe("b"), probe("c")}}
	if _, err := Build(context.Background(), g, BuildOptions{Cache: &Cache{Dir: t.TempDir()}, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ stage, finished string }{{"a", ""}, {"b", "a=miss"}, {"c", "a=miss b=miss"}} {
		r := seen[tt.stage]
		if r.Status != StatusRunning || !r.Finished.IsZero() || cacheStates(r) != tt.finished {
			t.Errorf("record during %s: status %q finished %v stages %q; want running, no finish time, stages %q",
				tt.stage, r.Status, r.Finished, cacheStates(r), tt.finished)
		}
	}
	if r := readRecord(t, out); r.Status != StatusSucceeded || r.Finished.IsZero() || cacheStates(r) != "a=miss b=miss c=miss" {
		t.Fatalf("final record: %+v", r)
	}
}

// TestStaleRecordTempsRemoved: a build killed while writing run.json leaves its temporary file
// behind; the next build into that directory removes it.
func TestStaleRecordTempsRemoved(t *testing.T) {
	out := t.TempDir()
	stale := filepath.Join(out, ".tmp-"+RecordFile+"-123456")
	other := filepath.Join(out, ".tmp-notes.txt-1")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Build(context.Background(), newTestGraph().graph(), BuildOptions{Cache: &Cache{Dir: t.TempDir()}, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale %s survived the next build (%v)", filepath.Base(stale), err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is not the record's was removed: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".tmp-"+RecordFile+"-*")); len(left) != 0 {
		t.Errorf("temporary record files left: %v", left)
	}
}

// TestFailedAndInterruptedRecords: the final record says how the build ended.
func TestFailedAndInterruptedRecords(t *testing.T) {
	tests := []struct {
		name   string
		cancel bool
		want   string
	}{
		{"stage fails", false, StatusFailed},
		{"cancelled", true, StatusInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tg := newTestGraph()
			tg.fail["b"] = errors.New("b broke")
			g := tg.graph()
			if tt.cancel {
				g.Stages[1].Run = func(context.Context, *Env) error { cancel(); return context.Canceled }
			}
			o := buildOpts(t, t.TempDir())
			if _, err := Build(ctx, g, o); err == nil {
				t.Fatal("build succeeded")
			}
			r := readRecord(t, o.OutputDir)
			if r.Status != tt.want || r.Finished.IsZero() || !strings.HasPrefix(cacheStates(r), "a=miss b=miss") {
				t.Fatalf("record: status %q finished %v stages %q; want %s", r.Status, r.Finished, cacheStates(r), tt.want)
			}
		})
	}
}
