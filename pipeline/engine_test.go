package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/pipeline/waittest"
)

// testGraph is a three-stage chain a → b → c; each stage writes one file derived from its
// option and its input, and counts its runs.
type testGraph struct {
	runs  map[string]*atomic.Int32
	opt   map[string]string
	files map[string]map[string]string
	fail  map[string]error
}

func newTestGraph() *testGraph {
	return &testGraph{
		runs:  map[string]*atomic.Int32{"a": {}, "b": {}, "c": {}},
		opt:   map[string]string{"a": "1", "b": "1", "c": "1"},
		files: map[string]map[string]string{},
		fail:  map[string]error{},
	}
}

func (tg *testGraph) graph() *Graph {
	mk := func(name string, deps ...string) Stage {
		return Stage{
			Name: name, Version: "1", Options: map[string]string{"value": tg.opt[name]},
			Deps: deps, Files: tg.files[name],
			Run: func(ctx context.Context, env *Env) error {
				tg.runs[name].Add(1)
				if err := tg.fail[name]; err != nil {
					return err
				}
				in := ""
				for _, d := range deps {
					b, err := os.ReadFile(filepath.Join(env.Inputs[d], "out.txt"))
					if err != nil {
						return err
					}
					in += string(b)
				}
				env.Log.Info("writing output", "stage", name)
				return os.WriteFile(filepath.Join(env.Out, "out.txt"), []byte(in+name+tg.opt[name]+";"), 0o644)
			},
		}
	}
	return &Graph{Blueprint: "test", Stages: []Stage{mk("a"), mk("b", "a"), mk("c", "b")}}
}

func buildOpts(t *testing.T, cacheDir string) BuildOptions {
	t.Helper()
	return BuildOptions{Cache: &Cache{Dir: cacheDir}, OutputDir: t.TempDir()}
}

func readRecord(t *testing.T, outDir string) *Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(outDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func cacheStates(r *Record) string {
	var parts []string
	for _, s := range r.Stages {
		parts = append(parts, s.Name+"="+s.Cache)
	}
	return strings.Join(parts, " ")
}

func TestBuildCachesAndRecords(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()

	o1 := buildOpts(t, cache)
	if _, err := Build(ctx, tg.graph(), o1); err != nil {
		t.Fatal(err)
	}
	r1 := readRecord(t, o1.OutputDir)
	if got := cacheStates(r1); got != "a=miss b=miss c=miss" {
		t.Fatalf("first build: %s", got)
	}
	if r1.Status != "succeeded" || len(r1.Stages[2].Artifacts) != 1 || r1.Stages[2].Artifacts[0].Size != int64(len("a1;b1;c1;")) {
		t.Fatalf("bad record: %+v", r1)
	}
	out, err := os.ReadFile(filepath.Join(o1.OutputDir, "c", "out.txt"))
	if err != nil || string(out) != "a1;b1;c1;" {
		t.Fatalf("output link: %q %v", out, err)
	}

	o2 := buildOpts(t, cache)
	if _, err := Build(ctx, tg.graph(), o2); err != nil {
		t.Fatal(err)
	}
	r2 := readRecord(t, o2.OutputDir)
	if got := cacheStates(r2); got != "a=hit b=hit c=hit" {
		t.Fatalf("second build: %s", got)
	}
	for i := range r1.Stages {
		if r1.Stages[i].Key != r2.Stages[i].Key {
			t.Errorf("stage %s key changed between identical builds", r1.Stages[i].Name)
		}
	}
	if tg.runs["a"].Load() != 1 || tg.runs["c"].Load() != 1 {
		t.Fatalf("stages re-ran: a=%d c=%d", tg.runs["a"].Load(), tg.runs["c"].Load())
	}

	// Changing b's option re-runs b and c, not a.
	tg.opt["b"] = "2"
	o3 := buildOpts(t, cache)
	if _, err := Build(ctx, tg.graph(), o3); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o3.OutputDir)); got != "a=hit b=miss c=miss" {
		t.Fatalf("after option change: %s", got)
	}
}

func TestFileDigestsDriveKeys(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	frag := filepath.Join(t.TempDir(), "frag.bu")
	os.WriteFile(frag, []byte("one"), 0o644)
	tg := newTestGraph()
	tg.files["b"] = map[string]string{"fragments/frag.bu": frag}
	if _, err := Build(ctx, tg.graph(), buildOpts(t, cache)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(frag, []byte("two"), 0o644)

	plan, err := Plan(ctx, tg.graph(), &Cache{Dir: cache}, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "cached", "b": "run", "c": "run"}
	for _, p := range plan {
		if p.Action != want[p.Name] {
			t.Errorf("plan %s: %s, want %s", p.Name, p.Action, want[p.Name])
		}
	}
	if r := strings.Join(plan[1].Reasons, ";"); r != "file fragments/frag.bu changed" {
		t.Errorf("b reasons: %q", r)
	}
	if r := strings.Join(plan[2].Reasons, ";"); r != "upstream b runs first; reused if its outputs come out unchanged" || plan[2].Key != "" {
		t.Errorf("c reasons: %q", r)
	}
	// Moving the file elsewhere with the same content and label keeps the key.
	moved := filepath.Join(t.TempDir(), "elsewhere.bu")
	os.WriteFile(moved, []byte("two"), 0o644)
	tg2 := newTestGraph()
	tg2.files["b"] = map[string]string{"fragments/frag.bu": moved}
	plan2, err := Plan(ctx, tg2.graph(), &Cache{Dir: cache}, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if plan2[1].Key != plan[1].Key {
		t.Error("the key depends on the file's host path")
	}
}

func TestPlanReasons(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	c := &Cache{Dir: cache}
	plan, err := Plan(ctx, tg.graph(), c, nil, Selection{Until: "b"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s:%s %s:%s %s:%s", plan[0].Name, plan[0].Action, plan[1].Name, plan[1].Action, plan[2].Name, plan[2].Action)
	if got != "a:run b:run c:skip" {
		t.Fatalf("until b: %s", got)
	}
	if plan[0].Reasons[0] != "never built with this cache" {
		t.Errorf("reason: %v", plan[0].Reasons)
	}
	if _, err := Build(ctx, tg.graph(), buildOpts(t, cache)); err != nil {
		t.Fatal(err)
	}
	tg.opt["a"] = "9"
	plan, _ = Plan(ctx, tg.graph(), c, nil, Selection{Force: []string{"c"}})
	if plan[0].Reasons[0] != "option value changed" {
		t.Errorf("a reasons: %v", plan[0].Reasons)
	}
	if plan[2].Reasons[0] != "forced with --force" {
		t.Errorf("c reasons: %v", plan[2].Reasons)
	}
	for _, sel := range []Selection{{Until: "nope"}, {Force: []string{"nope"}}} {
		if _, err := Plan(ctx, tg.graph(), c, nil, sel); err == nil || !strings.Contains(err.Error(), "no such stage") {
			t.Errorf("selection %+v: %v", sel, err)
		}
	}
}

func TestForceRerunsOnlyThatStage(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	Build(ctx, tg.graph(), buildOpts(t, cache))
	o := buildOpts(t, cache)
	o.Selection.Force = []string{"b"}
	if _, err := Build(ctx, tg.graph(), o); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=miss c=hit" {
		t.Fatalf("force b: %s", got)
	}
}

func TestFailureLeavesNoEntry(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	tg.fail["b"] = errors.New("boom")
	o := buildOpts(t, cache)
	_, err := Build(ctx, tg.graph(), o)
	var se *StageError
	if !errors.As(err, &se) || se.Stage != "b" || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "logs/b.log") {
		t.Fatalf("error: %v", err)
	}
	r := readRecord(t, o.OutputDir)
	if r.Status != "failed" || cacheStates(r) != "a=miss b=miss" || r.Stages[1].Error != "boom" {
		t.Fatalf("record: %+v", r)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "staging", "*")); len(left) != 0 {
		t.Fatalf("staging left behind: %v", left)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, "entries", "b", "*"))
	if len(entries) != 0 {
		t.Fatalf("failed stage committed: %v", entries)
	}

	o2 := buildOpts(t, cache)
	o2.KeepOnError = true
	_, err = Build(ctx, tg.graph(), o2)
	if !errors.As(err, &se) || se.KeptDir == "" {
		t.Fatalf("keep on error: %v", err)
	}
	if _, err := os.Stat(se.KeptDir); err != nil {
		t.Fatalf("kept dir missing: %v", err)
	}
}

func TestPanicBecomesError(t *testing.T) {
	g := &Graph{Blueprint: "p", Stages: []Stage{{Name: "x", Version: "1", Run: func(context.Context, *Env) error { panic("oops") }}}}
	_, err := Build(context.Background(), g, buildOpts(t, t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "internal error in stage x: oops") {
		t.Fatalf("got %v", err)
	}
}

func TestCancelLeavesCacheConsistent(t *testing.T) {
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	g := &Graph{Blueprint: "c", Stages: []Stage{{Name: "slow", Version: "1", Run: func(ctx context.Context, env *Env) error {
		os.WriteFile(filepath.Join(env.Out, "half"), []byte("x"), 0o644)
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}}}}
	o := buildOpts(t, cache)
	go func() { <-started; cancel() }()
	_, err := Build(ctx, g, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if r := readRecord(t, o.OutputDir); r.Status != "interrupted" {
		t.Fatalf("status %s", r.Status)
	}
	if e, _ := filepath.Glob(filepath.Join(cache, "entries", "slow", "*")); len(e) != 0 {
		t.Fatalf("interrupted stage committed: %v", e)
	}
}

func TestConcurrentBuildsRunAStageOnce(t *testing.T) {
	cache := t.TempDir()
	var runs atomic.Int32
	// The stage runs on only once every build has started, so all four overlap it; a build
	// that fails releases it instead, so the test reports the failure rather than hanging.
	var begun sync.WaitGroup
	begun.Add(4)
	allStarted, failed := make(chan struct{}), make(chan struct{})
	var failOnce sync.Once
	go func() { begun.Wait(); close(allStarted) }()
	g := func() *Graph {
		return &Graph{Blueprint: "conc", Stages: []Stage{{Name: "x", Version: "1", Run: func(ctx context.Context, env *Env) error {
			runs.Add(1)
			select {
			case <-allStarted:
			case <-failed:
				return errors.New("another build failed before all four started")
			}
			return os.WriteFile(filepath.Join(env.Out, "f"), []byte("x"), 0o644)
		}}}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := buildOpts(t, cache)
			o.Sink = SinkFunc(func(e Event) {
				if e.Kind == EventBuildStart {
					begun.Done()
				}
			})
			_, err := Build(context.Background(), g(), o)
			if err != nil {
				failOnce.Do(func() { close(failed) })
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("stage ran %d times", runs.Load())
	}
}

func TestSecretsNeverInClear(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	secretFile := filepath.Join(t.TempDir(), "ps.json")
	const secret = `{"auths":{"r":{"auth":"c2VjcmV0LXZhbHVl"}}}`
	os.WriteFile(secretFile, []byte(secret), 0o600)
	secrets := SecretFiles{"pullSecret": secretFile}
	g := func() *Graph {
		return &Graph{Blueprint: "s", Stages: []Stage{{Name: "x", Version: "1", Secrets: []string{"pullSecret"}, Run: func(ctx context.Context, env *Env) error {
			v, err := env.Secrets.Secret("pullSecret")
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.Out, "len"), []byte(fmt.Sprint(len(v))), 0o644)
		}}}}
	}
	o := buildOpts(t, cache)
	o.Secrets = secrets
	if _, err := Build(ctx, g(), o); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(cache, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "c2VjcmV0LXZhbHVl") {
			t.Errorf("secret found in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(cache, "secret-digest.key")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("hmac key file: %v %v", info, err)
	}
	p1, _ := Plan(ctx, g(), &Cache{Dir: cache}, secrets, Selection{})
	os.WriteFile(secretFile, []byte(`{"auths":{}}`), 0o600)
	p2, _ := Plan(ctx, g(), &Cache{Dir: cache}, secrets, Selection{})
	if p1[0].Key == p2[0].Key || p2[0].Reasons[0] != "secret pullSecret changed" {
		t.Fatalf("secret change not keyed: %v", p2[0].Reasons)
	}
}

func TestGraphValidate(t *testing.T) {
	noop := func(context.Context, *Env) error { return nil }
	g := &Graph{Stages: []Stage{{Name: "b", Deps: []string{"a"}, Run: noop}, {Name: "a", Run: noop}, {Name: "a", Run: noop}, {Name: "c"}}}
	err := g.Validate()
	for _, want := range []string{`"b" depends on "a"`, `"a" appears twice`, `"c" has no Run`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}

func TestExecToolErrorAndGroupKill(t *testing.T) {
	err := RunTool(context.Background(), exec.Command("sh", "-c", "echo first >&2; echo 'the real reason' >&2; exit 3"), nil)
	var te *ToolError
	if !errors.As(err, &te) || te.ExitCode != 3 || !strings.HasSuffix(te.StderrTail, "the real reason") || te.Tool != "sh" {
		t.Fatalf("got %#v", err)
	}

	// A grandchild must die with the tool when the context ends.
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancels once the tool has started its grandchild (its pid is written).
		for pid := 0; pid == 0; pid = readPID(pidFile) {
			time.Sleep(time.Millisecond) // paces the poll; the condition is the event
		}
		cancel()
	}()
	err = RunTool(ctx, exec.Command("sh", "-c", "sleep 60 & echo $! > "+pidFile+"; wait"), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	pid := readPID(pidFile)
	if pid == 0 {
		t.Fatal("the tool ended before it started its grandchild")
	}
	// The group kill is sent when RunTool returns; the grandchild goes when the kernel
	// delivers it. A survivor keeps this loop, and so the test, running until its timeout.
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(time.Millisecond) // paces the poll; the condition is the event
	}
}

// A tool that leaves a process behind outside its group (a daemon in its own session)
// holding its output pipe returns once the tool is gone: the orphan is not waited for.
func TestRunToolReturnsDespiteAnOrphanHoldingItsOutput(t *testing.T) {
	var out bytes.Buffer // not a file: RunTool copies from a pipe the orphan holds
	err := RunTool(t.Context(), exec.Command("sh", "-c", "setsid sleep 600 & echo $!"), &out)
	if pid, _ := strconv.Atoi(strings.TrimSpace(out.String())); pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if err != nil && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("got %v", err)
	}
}

func TestRunJSONIsValid(t *testing.T) {
	o := buildOpts(t, t.TempDir())
	Build(context.Background(), newTestGraph().graph(), o)
	b, _ := os.ReadFile(filepath.Join(o.OutputDir, "run.json"))
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	st := generic["stages"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "key", "cache", "duration", "artifacts"} {
		if _, ok := st[k]; !ok {
			t.Errorf("run.json stage lacks %q: %v", k, st)
		}
	}
}

func TestUntilIgnoresMissingFilesOfLaterStages(t *testing.T) {
	tg := newTestGraph()
	tg.files["c"] = map[string]string{"iso": filepath.Join(t.TempDir(), "not-built-yet.iso")}
	o := buildOpts(t, t.TempDir())
	o.Selection.Until = "b"
	if _, err := Build(context.Background(), tg.graph(), o); err != nil {
		t.Fatal(err)
	}
	o2 := buildOpts(t, o.Cache.Dir)
	if _, err := Build(context.Background(), tg.graph(), o2); err == nil || !strings.Contains(err.Error(), "not-built-yet.iso") {
		t.Fatalf("want an error naming the missing file, got %v", err)
	}
}

// Early cutoff and --force: a downstream stage chains on its upstream's outputs, so an
// upstream that re-runs with identical outputs leaves it cached, and one whose outputs
// changed (a forced resolve after a tag moved) makes it run.
func TestDownstreamChainsOnUpstreamOutputs(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	external := "v1" // what b's run sees of the world, outside its options (a registry tag)
	g := func() *Graph {
		gr := tg.graph()
		gr.Stages[1].Run = func(ctx context.Context, env *Env) error {
			tg.runs["b"].Add(1)
			return os.WriteFile(filepath.Join(env.Out, "out.txt"), []byte(external), 0o644)
		}
		return gr
	}
	if _, err := Build(ctx, g(), buildOpts(t, cache)); err != nil {
		t.Fatal(err)
	}
	// Forced, same outputs: c is still a hit.
	o := buildOpts(t, cache)
	o.Selection.Force = []string{"b"}
	if _, err := Build(ctx, g(), o); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=miss c=hit" {
		t.Fatalf("forced b, same output: %s", got)
	}
	// Forced, new outputs: c runs and sees them.
	external = "v2"
	o = buildOpts(t, cache)
	o.Selection.Force = []string{"b"}
	if _, err := Build(ctx, g(), o); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=miss c=miss" {
		t.Fatalf("forced b, new output: %s", got)
	}
	out, _ := os.ReadFile(filepath.Join(o.OutputDir, "c", "out.txt"))
	if string(out) != "v2c1;" {
		t.Fatalf("c built from stale input: %q", out)
	}
	// And the cache now serves the new chain without forcing.
	o = buildOpts(t, cache)
	if _, err := Build(ctx, g(), o); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=hit c=hit" {
		t.Fatalf("after: %s", got)
	}
	if out, _ := os.ReadFile(filepath.Join(o.OutputDir, "c", "out.txt")); string(out) != "v2c1;" {
		t.Fatalf("c: %q", out)
	}
}

// A report (Stage.Reports) that differs between two runs of a stage which made the same
// thing does not re-key the stages after it; a product file that differs does.
func TestReportsDoNotKeyDownstream(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	run, product := 0, "same"
	g := func() *Graph {
		gr := tg.graph()
		gr.Stages[1].Reports = []string{"report.json"}
		gr.Stages[1].Run = func(ctx context.Context, env *Env) error {
			run++
			if err := os.WriteFile(filepath.Join(env.Out, "report.json"), fmt.Appendf(nil, `{"run":%d}`, run), 0o644); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.Out, "out.txt"), []byte(product), 0o644)
		}
		return gr
	}
	for _, step := range []struct{ product, want string }{
		{"same", "a=miss b=miss c=miss"},
		{"same", "a=hit b=miss c=hit"},     // a new report only
		{"changed", "a=hit b=miss c=miss"}, // a new product
	} {
		product = step.product
		o := buildOpts(t, cache)
		o.Selection.Force = []string{"b"}
		if _, err := Build(ctx, g(), o); err != nil {
			t.Fatal(err)
		}
		rec := readRecord(t, o.OutputDir)
		if got := cacheStates(rec); got != step.want {
			t.Fatalf("b's product %q, run %d: %s, want %s", product, run, got, step.want)
		}
		if !slices.ContainsFunc(rec.Stages[1].Artifacts, func(a Artifact) bool { return a.Path == "report.json" }) {
			t.Errorf("the report is not recorded as an output: %+v", rec.Stages[1].Artifacts)
		}
	}
}

// Two builds of one graph in two caches whose middle stage makes other bytes each time (an
// installed disk is never bit-identical) give the stages after it other keys but the same
// recipes; a changed option changes the recipe of its stage and of those after it, and
// Plan gives each recipe before upstream stages have run.
func TestRecipesDoNotChainOnUpstreamBytes(t *testing.T) {
	ctx := context.Background()
	tg := newTestGraph()
	run := 0
	g := func() *Graph {
		gr := tg.graph()
		gr.Stages[1].Run = func(ctx context.Context, env *Env) error {
			run++
			return os.WriteFile(filepath.Join(env.Out, "out.txt"), fmt.Appendf(nil, "disk of build %d", run), 0o644)
		}
		return gr
	}
	build := func() *Record {
		o := buildOpts(t, t.TempDir())
		if _, err := Build(ctx, g(), o); err != nil {
			t.Fatal(err)
		}
		return readRecord(t, o.OutputDir)
	}
	first, second := build(), build()
	for i, s := range first.Stages {
		o := second.Stages[i]
		if s.Recipe == "" || s.Recipe != o.Recipe {
			t.Errorf("stage %s: recipes %q and %q", s.Name, s.Recipe, o.Recipe)
		}
		if keysDiffer := s.Key != o.Key; keysDiffer != (s.Name == "c") {
			t.Errorf("stage %s: keys %s and %s", s.Name, s.Key, o.Key)
		}
	}
	plan, err := Plan(ctx, g(), &Cache{Dir: t.TempDir()}, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plan {
		if p.Recipe != first.Stages[i].Recipe {
			t.Errorf("plan of %s (%s): recipe %s, the build's %s", p.Name, p.Action, p.Recipe, first.Stages[i].Recipe)
		}
	}
	tg.opt["b"] = "2"
	third := build()
	for i, s := range third.Stages {
		if changed := s.Recipe != first.Stages[i].Recipe; changed != (s.Name != "a") {
			t.Errorf("after b's option changed, stage %s's recipe changed: %v", s.Name, changed)
		}
	}
}

// A stage's secrets never reach its log, its events, its error or run.json, even when a
// tool prints them.
func TestSecretsRedactedFromLogsAndErrors(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "ps.json")
	const token = "c2VjcmV0LXRva2VuLXZhbHVl"
	os.WriteFile(secretFile, []byte(`{"auths":{"r.example":{"auth":"`+token+`"}}}`), 0o600)
	var events []Event
	g := &Graph{Blueprint: "red", Stages: []Stage{{Name: "x", Version: "1", Secrets: []string{"pullSecret"}, Run: func(ctx context.Context, env *Env) error {
		env.Log.Info("using auth " + token)
		return env.Exec(ctx, exec.Command("sh", "-c", "echo 'bad auth "+token+"' >&2; exit 1"))
	}}}}
	o := buildOpts(t, t.TempDir())
	o.Secrets = SecretFiles{"pullSecret": secretFile}
	o.Sink = SinkFunc(func(e Event) { events = append(events, e) })
	_, err := Build(context.Background(), g, o)
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "bad auth [REDACTED]") {
		t.Fatalf("error: %v", err)
	}
	for _, e := range events {
		if strings.Contains(e.Message+e.Error, token) {
			t.Fatalf("event leaks the secret: %+v", e)
		}
	}
	filepath.Walk(o.OutputDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), token) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	log, _ := os.ReadFile(filepath.Join(o.OutputDir, "logs", "x.log"))
	if !strings.Contains(string(log), "using auth [REDACTED]") {
		t.Errorf("log: %s", log)
	}
}

func TestScratchIsPrivateAndRemoved(t *testing.T) {
	var scratch string
	g := &Graph{Blueprint: "s", Stages: []Stage{{Name: "x", Version: "1", Run: func(ctx context.Context, env *Env) error {
		scratch = env.Scratch
		return os.WriteFile(filepath.Join(env.Scratch, "auth.json"), []byte("x"), 0o600)
	}}}}
	o := buildOpts(t, t.TempDir())
	if _, err := Build(context.Background(), g, o); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(scratch, o.Cache.Dir) {
		t.Errorf("scratch %s is outside the cache", scratch)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("scratch %s not removed: %v", scratch, err)
	}
}

// Outputs are reached through links in the output directory: an edit made there must not
// become what later builds get from the cache.
func TestModifiedEntryIsRebuilt(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	o := buildOpts(t, cache)
	if _, err := Build(ctx, tg.graph(), o); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(o.OutputDir, "b", "out.txt")
	if info, _ := os.Stat(f); info.Mode().Perm()&0o222 != 0 {
		t.Errorf("committed output is writable: %v", info.Mode())
	}
	os.Chmod(f, 0o644)
	info, _ := os.Stat(f)
	if err := os.WriteFile(f, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A later mtime for certain, whatever the filesystem's timestamp granularity.
	later := info.ModTime().Add(time.Second)
	os.Chtimes(f, later, later)
	o2 := buildOpts(t, cache)
	if _, err := Build(ctx, tg.graph(), o2); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o2.OutputDir)); got != "a=hit b=miss c=hit" {
		t.Fatalf("after tampering with b: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(o2.OutputDir, "b", "out.txt")); string(b) != "a1;b1;" {
		t.Fatalf("b's output: %q", b)
	}
}

// Ctrl-C while another build holds the entry's lock stops the wait instead of hanging, and
// the wait is announced (naming the lock) before it starts.
func TestWaitingForAnEntryLockIsCancellable(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	var waited []string
	unlock, err := c.lock(context.Background(), strings.Repeat("a", 64), func(l string) { waited = append(waited, l) })
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if len(waited) != 0 {
		t.Fatalf("a free lock announced a wait: %v", waited)
	}
	if _, err := c.lock(waittest.CancelOnWait(), strings.Repeat("a", 64), func(l string) { waited = append(waited, l) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if len(waited) != 1 || !strings.HasSuffix(waited[0], strings.Repeat("a", 64)+".lock") {
		t.Fatalf("waits announced: %v; want the held lock, once", waited)
	}
}

// A stage whose outputs have a life (a config holding 24 h certificates) is a cache hit
// within it and runs again after it; plan and the stage's start event say why.
func TestMaxAge(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	tg := newTestGraph()
	clock := clocktest.New(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC))
	graph := func() *Graph {
		g := tg.graph()
		g.Stages[1].MaxAge = 24 * time.Hour
		return g
	}
	o := buildOpts(t, cache)
	o.Cache.Clock = clock
	if _, err := Build(ctx, graph(), o); err != nil {
		t.Fatal(err)
	}
	clock.Advance(23 * time.Hour)
	o = buildOpts(t, cache)
	o.Cache.Clock = clock
	if _, err := Build(ctx, graph(), o); err != nil {
		t.Fatal(err)
	}
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=hit c=hit" {
		t.Fatalf("within its life: %s", got)
	}
	clock.Advance(3 * time.Hour)
	plan, err := Plan(ctx, graph(), &Cache{Dir: cache, Clock: clock}, nil, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if plan[1].Action != "run" || len(plan[1].Reasons) != 1 || plan[1].Reasons[0] != "the cached output is 26h0m0s old, older than its 24h0m0s life" {
		t.Errorf("plan b: %s %v", plan[1].Action, plan[1].Reasons)
	}
	if plan[0].Action != "cached" {
		t.Errorf("plan a: %s: a stage without a life expired", plan[0].Action)
	}
	o = buildOpts(t, cache)
	o.Cache.Clock = clock
	if _, err := Build(ctx, graph(), o); err != nil {
		t.Fatal(err)
	}
	// b's output is the same bytes, so c, which chains on them, stays a hit.
	if got := cacheStates(readRecord(t, o.OutputDir)); got != "a=hit b=miss c=hit" {
		t.Fatalf("after its life: %s", got)
	}
}

// readPID is the pid written in path, 0 while there is none (yet).
func readPID(path string) int {
	b, _ := os.ReadFile(path)
	var pid int
	fmt.Sscan(string(b), &pid)
	return pid
}
