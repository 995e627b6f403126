package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

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
