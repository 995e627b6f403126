package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type testRecord struct {
	File  string `json:"file"`
	Count int    `json:"count"`
}

// Upstream writes a typed record; downstream reads it back through the engine, and a stage
// that reads a stage it does not depend on is told it is a wiring bug.
func TestOutputRecordRoundTrip(t *testing.T) {
	var got testRecord
	var gotDir string
	g := &Graph{Blueprint: "t", Stages: []Stage{
		{Name: "up", Version: "1", Run: func(ctx context.Context, env *Env) error {
			if err := os.WriteFile(filepath.Join(env.Out, "data.bin"), []byte("x"), 0o644); err != nil {
				return err
			}
			return env.WriteOutput(testRecord{File: "data.bin", Count: 3})
		}},
		{Name: "down", Version: "1", Deps: []string{"up"}, Run: func(ctx context.Context, env *Env) error {
			dir, err := env.ReadOutput("up", &got)
			gotDir = dir
			if err != nil {
				return err
			}
			if _, err := env.ReadOutput("other", &got); err == nil || !strings.Contains(err.Error(), "not one of its dependencies") {
				t.Errorf("reading a non-dependency: %v", err)
			}
			return nil
		}},
	}}
	if _, err := Build(context.Background(), g, buildOpts(t, t.TempDir())); err != nil {
		t.Fatal(err)
	}
	if want := (testRecord{File: "data.bin", Count: 3}); got != want {
		t.Fatalf("record %+v, want %+v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(gotDir, got.File)); err != nil || string(b) != "x" {
		t.Fatalf("file named by the record: %q, %v", b, err)
	}
}

func TestReadOutputWithoutRecordNamesTheFix(t *testing.T) {
	g := &Graph{Blueprint: "t", Stages: []Stage{
		{Name: "up", Version: "1", Run: func(ctx context.Context, env *Env) error { return nil }},
		{Name: "down", Version: "1", Deps: []string{"up"}, Run: func(ctx context.Context, env *Env) error {
			var r testRecord
			_, err := env.ReadOutput("up", &r)
			return err
		}},
	}}
	_, err := Build(context.Background(), g, buildOpts(t, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "--force up") {
		t.Fatalf("got %v, want an error naming --force up", err)
	}
}

// Cleanups run newest first on success, failure, cancellation and panic, each on a context
// that is not cancelled, and before the outputs are committed.
func TestCleanupsRunInReverseWhateverTheOutcome(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name    string
		end     func(cancel context.CancelFunc) error
		wantErr bool
	}{
		{"success", func(context.CancelFunc) error { return nil }, false},
		{"failure", func(context.CancelFunc) error { return boom }, true},
		{"cancel", func(cancel context.CancelFunc) error { cancel(); return context.Canceled }, true},
		{"panic", func(context.CancelFunc) error { panic("bad") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var order []string
			var outDir string
			mk := func(name string) func(context.Context) error {
				return func(cctx context.Context) error {
					if cctx.Err() != nil {
						t.Errorf("cleanup %s got a done context", name)
					}
					// outputs are still in staging while cleanups run
					if _, err := os.Stat(filepath.Join(outDir, "f")); err != nil {
						t.Errorf("cleanup %s ran after the outputs moved: %v", name, err)
					}
					order = append(order, name)
					return nil
				}
			}
			g := &Graph{Blueprint: "t", Stages: []Stage{{Name: "s", Version: "1", Run: func(_ context.Context, env *Env) error {
				outDir = env.Out
				if err := os.WriteFile(filepath.Join(env.Out, "f"), nil, 0o644); err != nil {
					return err
				}
				env.Cleanup("first", mk("first"))
				env.Cleanup("second", mk("second"))
				return tt.end(cancel)
			}}}}
			_, err := Build(ctx, g, buildOpts(t, t.TempDir()))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if want := []string{"second", "first"}; !reflect.DeepEqual(order, want) {
				t.Fatalf("cleanup order %v, want %v", order, want)
			}
		})
	}
}

// A failing cleanup fails an otherwise good stage (a resource left behind is a defect the
// user must see), lets the other cleanups run, and leaves no cache entry.
func TestFailingCleanupFailsTheStage(t *testing.T) {
	ran := false
	g := &Graph{Blueprint: "t", Stages: []Stage{{Name: "s", Version: "1", Run: func(_ context.Context, env *Env) error {
		env.Cleanup("vm", func(context.Context) error { ran = true; return nil })
		env.Cleanup("disk", func(context.Context) error { return errors.New("device busy") })
		return nil
	}}}}
	opts := buildOpts(t, t.TempDir())
	_, err := Build(context.Background(), g, opts)
	if err == nil || !strings.Contains(err.Error(), "cleaning up disk: device busy") {
		t.Fatalf("got %v", err)
	}
	if !ran {
		t.Fatal("the other cleanup did not run")
	}
	plan, err := Plan(context.Background(), g, opts.Cache, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if plan[0].Action != "run" {
		t.Fatalf("a stage whose cleanup failed was cached: %+v", plan[0])
	}
}

func TestCleanupsOutsideAStage(t *testing.T) {
	var c Cleanups
	var order []int
	for i := range 3 {
		c.Cleanup("step", func(context.Context) error { order = append(order, i); return nil })
	}
	c.Cleanup("panics", func(context.Context) error { panic("x") })
	err := c.Run()
	if err == nil || !strings.Contains(err.Error(), "cleaning up panics") {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(order, []int{2, 1, 0}) {
		t.Fatalf("order %v", order)
	}
	if err := c.Run(); err != nil || len(order) != 3 {
		t.Fatalf("second Run re-ran cleanups: %v %v", err, order)
	}
}

// A stage's summary reaches run.json on the run that made it and on every cache hit after.
func TestSummaryInRecordAndOnHits(t *testing.T) {
	g := &Graph{Blueprint: "t", Stages: []Stage{{Name: "s", Version: "1", Run: func(_ context.Context, env *Env) error {
		return env.Summarize(map[string]int{"passed": 3, "failed": 0})
	}}}}
	cache := t.TempDir()
	for _, want := range []string{"miss", "hit"} {
		opts := buildOpts(t, cache)
		if _, err := Build(context.Background(), g, opts); err != nil {
			t.Fatal(err)
		}
		r := readRecord(t, opts.OutputDir)
		var got bytes.Buffer
		if err := json.Compact(&got, r.Stages[0].Summary); err != nil {
			t.Fatalf("%s: summary %q: %v", want, r.Stages[0].Summary, err)
		}
		if r.Stages[0].Cache != want || got.String() != `{"failed":0,"passed":3}` {
			t.Fatalf("%s: cache %s summary %s", want, r.Stages[0].Cache, got.String())
		}
	}
}
