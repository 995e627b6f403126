package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
