package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Graph is the ordered set of stages of one blueprint's build.
type Graph struct {
	// Blueprint names the build in events, run records and the last-build index.
	Blueprint string
	Stages    []Stage
}

// Validate checks names are unique, dependencies exist and come earlier, and every stage can run.
func (g *Graph) Validate() error {
	seen := map[string]bool{}
	var errs []error
	for _, s := range g.Stages {
		if s.Name == "" {
			errs = append(errs, errors.New("a stage has no name"))
			continue
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("stage %q appears twice", s.Name))
		}
		for _, d := range s.Deps {
			if !seen[d] {
				errs = append(errs, fmt.Errorf("stage %q depends on %q, which does not come before it", s.Name, d))
			}
		}
		if s.Run == nil {
			errs = append(errs, fmt.Errorf("stage %q has no Run", s.Name))
		}
		seen[s.Name] = true
	}
	return errors.Join(errs...)
}

func (g *Graph) stage(name string) (Stage, bool) {
	for _, s := range g.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

// Selection chooses which part of a graph a build or plan covers.
type Selection struct {
	// Until stops after this stage: it and every stage before it in pipeline order run;
	// "" means all stages.
	Until string
	// Force re-runs these stages even if their key is cached.
	Force []string
}

// selected returns the names of the stages the selection covers.
func (g *Graph) selected(sel Selection) (map[string]bool, error) {
	for _, f := range sel.Force {
		if _, ok := g.stage(f); !ok {
			return nil, fmt.Errorf("--force %s: no such stage (stages: %s)", f, g.names())
		}
	}
	want := map[string]bool{}
	if sel.Until == "" {
		for _, s := range g.Stages {
			want[s.Name] = true
		}
		return want, nil
	}
	if _, ok := g.stage(sel.Until); !ok {
		return nil, fmt.Errorf("--until %s: no such stage (stages: %s)", sel.Until, g.names())
	}
	// Every stage up to and including Until in pipeline order: dependencies always come
	// earlier (Validate), so they are included too.
	for _, s := range g.Stages {
		want[s.Name] = true
		if s.Name == sel.Until {
			break
		}
	}
	return want, nil
}

func (g *Graph) names() string {
	var out string
	for i, s := range g.Stages {
		if i > 0 {
			out += ", "
		}
		out += s.Name
	}
	return out
}

// PlannedStage says what a build would do with one stage.
type PlannedStage struct {
	Name    string    `json:"name"`
	Key     string    `json:"key"`
	Deps    []string  `json:"deps,omitempty"`
	Action  string    `json:"action"` // "run", "cached", "skip" (not selected)
	Reasons []string  `json:"reasons,omitempty"`
	Inputs  KeyInputs `json:"inputs"`
}

// keyer computes key inputs for the stages of a graph against one cache.
type keyer struct {
	cache   *Cache
	secrets SecretSource
	hmacKey []byte
	keys    map[string]string
}

func newKeyer(c *Cache, secrets SecretSource) (*keyer, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cache directory: %w", err)
	}
	k, err := hmacKey(c.Dir)
	if err != nil {
		return nil, err
	}
	return &keyer{cache: c, secrets: secrets, hmacKey: k, keys: map[string]string{}}, nil
}

func (k *keyer) inputs(s Stage) (KeyInputs, error) {
	opts, err := canonicalJSON(s.Options)
	if err != nil {
		return KeyInputs{}, fmt.Errorf("stage %s: encoding options: %w", s.Name, err)
	}
	in := KeyInputs{Stage: s.Name, Version: s.Version, Options: opts}
	for _, d := range s.Deps {
		if in.Deps == nil {
			in.Deps = map[string]string{}
		}
		in.Deps[d] = k.keys[d]
	}
	for label, p := range s.Files {
		dg, err := digestPath(p)
		if err != nil {
			return KeyInputs{}, fmt.Errorf("stage %s reads %s: %w", s.Name, p, err)
		}
		if in.Files == nil {
			in.Files = map[string]string{}
		}
		in.Files[label] = dg
	}
	for _, name := range s.Secrets {
		if k.secrets == nil {
			return KeyInputs{}, fmt.Errorf("stage %s needs secret %q but no secrets were given", s.Name, name)
		}
		v, err := k.secrets.Secret(name)
		if err != nil {
			return KeyInputs{}, fmt.Errorf("stage %s: %w", s.Name, err)
		}
		if in.Secrets == nil {
			in.Secrets = map[string]string{}
		}
		in.Secrets[name] = secretDigest(k.hmacKey, v)
	}
	k.keys[s.Name] = in.Key()
	return in, nil
}

// Plan computes every stage's key and says which stages a build with this selection would
// run and why, without running anything.
func Plan(ctx context.Context, g *Graph, c *Cache, secrets SecretSource, sel Selection) ([]PlannedStage, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	want, err := g.selected(sel)
	if err != nil {
		return nil, err
	}
	k, err := newKeyer(c, secrets)
	if err != nil {
		return nil, err
	}
	var plan []PlannedStage
	for _, s := range g.Stages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in, err := k.inputs(s)
		if err != nil {
			if !want[s.Name] {
				// A stage after --until may read files that do not exist yet (an ISO a later
				// make target builds); that must not stop the stages before it.
				plan = append(plan, PlannedStage{Name: s.Name, Deps: s.Deps, Action: "skip", Reasons: []string{"not selected (after --until)"}})
				continue
			}
			return nil, err
		}
		ps := PlannedStage{Name: s.Name, Key: in.Key(), Deps: s.Deps, Inputs: in}
		_, hit, err := c.Lookup(s.Name, ps.Key)
		if err != nil {
			return nil, err
		}
		switch {
		case !want[s.Name]:
			ps.Action = "skip"
			ps.Reasons = []string{"not selected (after --until)"}
		case slices.Contains(sel.Force, s.Name):
			ps.Action = "run"
			ps.Reasons = []string{"forced with --force"}
		case s.Uncached:
			ps.Action = "run"
			ps.Reasons = []string{"always runs (its effect is outside the cache)"}
		case hit:
			ps.Action = "cached"
		default:
			ps.Action = "run"
			if last, ok := c.lastInputs(g.Blueprint, s.Name); ok {
				ps.Reasons = in.Diff(last)
				if len(ps.Reasons) == 0 {
					ps.Reasons = []string{"inputs unchanged since the last build, but its cache entry is gone"}
				}
			} else {
				ps.Reasons = []string{"never built with this cache"}
			}
		}
		plan = append(plan, ps)
	}
	return plan, nil
}

// BuildOptions configures a build.
type BuildOptions struct {
	Cache     *Cache
	OutputDir string
	Selection Selection
	Secrets   SecretSource
	Sink      Sink
	// KeepOnError keeps a failed stage's staging directory for inspection.
	KeepOnError bool
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// Build runs the selected stages of g in order, reusing cached entries, and writes run.json to
// the output directory whatever the outcome. The returned record is also valid on error.
func Build(ctx context.Context, g *Graph, opts BuildOptions) (*Record, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	em := &emitter{sink: opts.Sink, blueprint: g.Blueprint, now: opts.Now}
	rec := &Record{Blueprint: g.Blueprint, Started: opts.Now(), CacheDir: opts.Cache.Dir}
	if err := os.MkdirAll(filepath.Join(opts.OutputDir, "logs"), 0o755); err != nil {
		return rec, fmt.Errorf("creating output directory: %w", err)
	}
	err := build(ctx, g, opts, em, rec)
	rec.Finished = opts.Now()
	rec.Status = "succeeded"
	if err != nil {
		rec.Status = "failed"
		if ctx.Err() != nil {
			rec.Status = "interrupted"
		}
		rec.Error = err.Error()
	}
	if werr := rec.write(filepath.Join(opts.OutputDir, "run.json")); werr != nil && err == nil {
		err = werr
	}
	em.emit(Event{Kind: EventBuildDone, Message: rec.Status, Error: rec.Error, Duration: rec.Finished.Sub(rec.Started)})
	return rec, err
}

func build(ctx context.Context, g *Graph, opts BuildOptions, em *emitter, rec *Record) error {
	plan, err := Plan(ctx, g, opts.Cache, opts.Secrets, opts.Selection)
	if err != nil {
		return err
	}
	em.emit(Event{Kind: EventBuildStart, Message: fmt.Sprintf("%d stages", len(plan))})
	k, err := newKeyer(opts.Cache, opts.Secrets)
	if err != nil {
		return err
	}
	outputs := map[string]string{}
	for _, ps := range plan {
		s, _ := g.stage(ps.Name)
		k.keys[s.Name] = ps.Key
		if ps.Action == "skip" {
			continue
		}
		sr, err := runStage(ctx, s, ps, outputs, opts, em, k)
		rec.Stages = append(rec.Stages, sr)
		if err != nil {
			return err
		}
		outputs[s.Name] = sr.dir
		link := filepath.Join(opts.OutputDir, s.Name)
		os.Remove(link)
		if err := os.Symlink(sr.dir, link); err != nil {
			return fmt.Errorf("linking %s outputs into %s: %w", s.Name, opts.OutputDir, err)
		}
	}
	return nil
}

func runStage(ctx context.Context, s Stage, ps PlannedStage, outputs map[string]string, opts BuildOptions, em *emitter, k *keyer) (StageRecord, error) {
	c := opts.Cache
	start := opts.Now()
	sr := StageRecord{Name: s.Name, Key: ps.Key}
	forced := slices.Contains(opts.Selection.Force, s.Name)

	unlock, err := c.lock(ps.Key)
	if err != nil {
		return sr, err
	}
	defer unlock()
	// Another build may have made the entry while we waited for the lock.
	if e, hit, err := c.Lookup(s.Name, ps.Key); err != nil {
		return sr, err
	} else if hit && !forced && !s.Uncached {
		sr.Cache, sr.dir, sr.Artifacts, sr.Tools = "hit", e.Dir, e.Artifacts, e.Tools
		sr.Duration = Duration(opts.Now().Sub(start))
		em.emit(Event{Kind: EventStageHit, Stage: s.Name, Key: ps.Key, Cache: "hit", Duration: time.Duration(sr.Duration)})
		c.recordInputs(em.blueprint, s.Name, ps.Inputs)
		return sr, nil
	}
	sr.Cache = "miss"
	c.removeStale(s.Name, ps.Key)
	staged, err := c.stage(s.Name, ps.Key)
	if err != nil {
		return sr, fmt.Errorf("stage %s: creating staging directory: %w", s.Name, err)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(staged)
		}
	}()
	logPath, _ := filepath.Abs(filepath.Join(opts.OutputDir, "logs", s.Name+".log"))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return sr, fmt.Errorf("stage %s: opening log: %w", s.Name, err)
	}
	defer logFile.Close()
	env := &Env{
		Out:     staged,
		Inputs:  map[string]string{},
		Shared:  c.shared,
		Secrets: opts.Secrets,
		Log:     slog.New(newStageLogHandler(logFile, em, s.Name)),
		LogPath: logPath,
		tools:   map[string]string{},
		events:  em,
		stage:   s.Name,
	}
	for _, d := range s.Deps {
		env.Inputs[d] = outputs[d]
	}
	em.emit(Event{Kind: EventStageStart, Stage: s.Name, Key: ps.Key, Message: reasonText(ps)})
	runErr := safeRun(ctx, s, env)
	sr.Tools = env.tools
	if runErr == nil {
		runErr = ctx.Err()
	}
	if runErr != nil {
		sr.Duration = Duration(opts.Now().Sub(start))
		sr.Error = runErr.Error()
		sr.LogPath = logPath
		if opts.KeepOnError && ctx.Err() == nil {
			keep = true
			sr.KeptDir = staged
		}
		em.emit(Event{Kind: EventStageFail, Stage: s.Name, Key: ps.Key, Error: runErr.Error(), Duration: time.Duration(sr.Duration)})
		return sr, &StageError{Stage: s.Name, LogPath: logPath, KeptDir: sr.KeptDir, Err: runErr}
	}
	arts, err := artifacts(staged)
	if err != nil {
		return sr, fmt.Errorf("stage %s: listing outputs: %w", s.Name, err)
	}
	e, err := c.commit(staged, Entry{Stage: s.Name, Key: ps.Key, Inputs: ps.Inputs, Artifacts: arts, Tools: env.tools})
	if err != nil {
		return sr, err
	}
	c.recordInputs(em.blueprint, s.Name, ps.Inputs)
	sr.dir, sr.Artifacts = e.Dir, arts
	sr.Duration = Duration(opts.Now().Sub(start))
	em.emit(Event{Kind: EventStageDone, Stage: s.Name, Key: ps.Key, Cache: "miss", Duration: time.Duration(sr.Duration)})
	return sr, nil
}

// safeRun turns a stage panic into an error naming the stage, so no panic reaches the user.
func safeRun(ctx context.Context, s Stage, env *Env) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in stage %s: %v (this is a bug in snofactory)", s.Name, r)
		}
	}()
	return s.Run(ctx, env)
}

func reasonText(ps PlannedStage) string {
	if len(ps.Reasons) == 0 {
		return ""
	}
	out := ps.Reasons[0]
	for _, r := range ps.Reasons[1:] {
		out += "; " + r
	}
	return out
}

// StageError is a failed stage: which one, why, and where its full log is.
type StageError struct {
	Stage   string
	LogPath string
	KeptDir string
	Err     error
}

func (e *StageError) Error() string {
	msg := fmt.Sprintf("stage %s failed: %v\nfull log: %s", e.Stage, e.Err, e.LogPath)
	if e.KeptDir != "" {
		msg += "\npartial outputs kept in: " + e.KeptDir
	}
	return msg
}

func (e *StageError) Unwrap() error { return e.Err }
