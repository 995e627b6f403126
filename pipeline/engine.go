package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
)

// Graph is the ordered set of stages of one blueprint's build.
type Graph struct {
	// Blueprint names the build in events, run records and the last-build index.
	Blueprint string
	Stages    []Stage
	// Inputs are the files the build reads (the blueprint and what it names): neither the
	// output nor the cache directory may hold one, so no output ever lands on an input.
	Inputs []string
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
		if s.Run == nil && s.Unavailable == "" {
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
			return nil, inputErrorf("--force %s: no such stage (stages: %s)", f, g.names())
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
		return nil, inputErrorf("--until %s: no such stage (stages: %s)", sel.Until, g.names())
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
	Recipe  string    `json:"recipe"` // KeyInputs.Recipe: known even while Key waits on upstream outputs
	Deps    []string  `json:"deps,omitempty"`
	Action  string    `json:"action"` // "run", "cached", "skip" (not selected), "unavailable" (Stage.Unavailable)
	Reasons []string  `json:"reasons,omitempty"`
	Inputs  KeyInputs `json:"inputs"`
	// Session is the live session (Stage.Session) a stage that runs would run in, named
	// as the build will name it: stages naming the same session share one boot.
	Session string `json:"session,omitempty"`
}

// keyer computes key inputs for the stages of a graph against one cache. A stage's key
// chains on each upstream stage's key and the digest of its outputs, so a stage whose
// upstream re-ran with identical outputs is still a cache hit (early cutoff), and one whose
// upstream produced something new (say, a forced resolve after a tag moved) runs again.
type keyer struct {
	cache   *Cache
	secrets SecretSource
	hmacKey []byte
	keys    map[string]string
	recipes map[string]string // KeyInputs.Recipe of each stage keyed so far
	// outs holds each stage's output digest once known: from its cache entry, or after it ran.
	outs map[string]string
	ctx  context.Context
}

func newKeyer(ctx context.Context, c *Cache, secrets SecretSource) (*keyer, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cache directory: %w", err)
	}
	k, err := hmacKey(c.Dir)
	if err != nil {
		return nil, err
	}
	return &keyer{cache: c, secrets: secrets, hmacKey: k, keys: map[string]string{}, recipes: map[string]string{}, outs: map[string]string{}, ctx: ctx}, nil
}

// pendingOutput stands for the outputs of an upstream stage that has not run yet.
const pendingOutput = "pending"

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
		out := k.outs[d]
		if out == "" {
			out = pendingOutput
		}
		in.Deps[d] = k.keys[d] + "/" + out
	}
	for label, p := range s.Files {
		dg, err := k.cache.memoDigest(k.ctx, p)
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
	k.recipes[s.Name] = in.Recipe(k.recipes)
	return in, nil
}

// pendingDeps lists the upstream stages whose outputs are not known yet.
func (k *keyer) pendingDeps(s Stage) []string {
	var out []string
	for _, d := range s.Deps {
		if k.outs[d] == "" {
			out = append(out, d)
		}
	}
	return out
}

// Plan computes every stage's key and says which stages a build with this selection would
// run and why, without running anything. A stage downstream of one that will run has no key
// yet (it chains on that stage's outputs): its reason says so.
func Plan(ctx context.Context, g *Graph, c *Cache, secrets SecretSource, sel Selection) ([]PlannedStage, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	want, err := g.selected(sel)
	if err != nil {
		return nil, err
	}
	if err := checkDir("cache directory", c.Dir, false); err != nil {
		return nil, err
	}
	k, err := newKeyer(ctx, c, secrets)
	if err != nil {
		return nil, err
	}
	var plan []PlannedStage
	sessions := sessionNames{open: map[string]string{}}
	for _, s := range g.Stages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if why := unavailable(s, plan); why != "" {
			plan = append(plan, PlannedStage{Name: s.Name, Deps: s.Deps, Action: "unavailable", Reasons: []string{why}})
			continue
		}
		pending := k.pendingDeps(s)
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
		ps := PlannedStage{Name: s.Name, Key: in.Key(), Recipe: k.recipes[s.Name], Deps: s.Deps, Inputs: in}
		var entry Entry
		hit, expired := false, ""
		if len(pending) == 0 {
			if entry, hit, expired, err = c.lookupFresh(s, ps.Key); err != nil {
				return nil, err
			}
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
			k.outs[s.Name] = OutputDigest(entry.Artifacts, s.Reports...)
		case len(pending) > 0:
			ps.Action = "run"
			ps.Key = ""
			ps.Reasons = pendingReasons(c, g.Blueprint, in, pending)
		case expired != "":
			ps.Action = "run"
			ps.Reasons = []string{expired}
		default:
			ps.Action = "run"
			ps.Reasons = changes(c, g.Blueprint, in)
		}
		if ps.Action == "run" && s.Session != "" {
			ps.Session = sessions.name(s.Session)
		}
		plan = append(plan, ps)
	}
	return plan, nil
}

// sessionNames numbers the sessions a build would start, as the build does: a stage that
// runs takes over the session of its kind an earlier stage handed on.
type sessionNames struct {
	open    map[string]string
	started int
}

// name is the session a running stage of this kind joins, starting one if none is open.
func (n *sessionNames) name(kind string) string {
	if n.open[kind] == "" {
		n.started++
		n.open[kind] = fmt.Sprintf("%s-%d", kind, n.started)
	}
	return n.open[kind]
}

// lookupFresh looks s's entry up under key; an entry older than s.MaxAge is no hit, and
// expired says why.
func (c *Cache) lookupFresh(s Stage, key string) (entry Entry, hit bool, expired string, err error) {
	if entry, hit, err = c.Lookup(s.Name, key); err != nil || !hit {
		return entry, false, "", err
	}
	if expired = c.Expired(entry, s.MaxAge); expired != "" {
		return entry, false, expired, nil
	}
	return entry, true, "", nil
}

// unavailable says why a build cannot run s: its own Unavailable reason, or an upstream
// stage already planned as unavailable. "" means it can run.
func unavailable(s Stage, planned []PlannedStage) string {
	if s.Unavailable != "" {
		return s.Unavailable
	}
	for _, p := range planned {
		if p.Action == "unavailable" && slices.Contains(s.Deps, p.Name) {
			return fmt.Sprintf("needs stage %s, which is unavailable", p.Name)
		}
	}
	return ""
}

// pendingReasons explains a stage whose upstream runs first: what else changed, and that it
// is reused if the upstream's outputs come out the same.
func pendingReasons(c *Cache, blueprint string, in KeyInputs, pending []string) []string {
	var why []string
	if last, ok := c.lastInputs(blueprint, in.Stage); ok {
		own := in
		own.Deps, last.Deps = nil, nil
		why = own.Diff(last)
	}
	if len(pending) == 1 {
		return append(why, fmt.Sprintf("upstream %s runs first; reused if its outputs come out unchanged", pending[0]))
	}
	return append(why, fmt.Sprintf("upstream %s run first; reused if their outputs come out unchanged", strings.Join(pending, " and ")))
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
	// Slots, when set, hands out the resources a stage's run holds (Stage.Resources): a
	// depot's builds share VM slots, CPUs and memory through it.
	Slots Slots
	// Clock stamps the record and events (nil: the wall clock); tests pass a fake.
	Clock clock.Clock
}

// Build runs the selected stages of g in order, reusing cached entries. It checks its
// arguments first: a build refused for them (an *badinput.Error, or an invalid graph) touches
// nothing on disk. Otherwise run.json in the output directory says "running" from the start,
// lists each stage as it finishes, and ends succeeded, failed or interrupted. The returned
// record is also valid on error.
func Build(ctx context.Context, g *Graph, opts BuildOptions) (*Record, error) {
	opts.Clock = clock.Or(opts.Clock)
	rec := &Record{Blueprint: g.Blueprint, Status: StatusRunning, Started: opts.Clock.Now(), CacheDir: opts.Cache.Dir}
	want, err := checkBuild(g, opts)
	if err != nil {
		rec.Status, rec.Finished, rec.Error = StatusFailed, opts.Clock.Now(), err.Error()
		return rec, err
	}
	if err := startRecord(opts.OutputDir, rec); err != nil {
		rec.Status, rec.Finished, rec.Error = StatusFailed, opts.Clock.Now(), err.Error()
		return rec, err
	}
	em := &emitter{sink: opts.Sink, blueprint: g.Blueprint, clock: opts.Clock}
	path := filepath.Join(opts.OutputDir, RecordFile)
	// What this build uses stays pinned (safe from prune) while it runs, not after.
	l := opts.Cache.newLease()
	defer opts.Cache.releaseLease(l)
	ss := newSessions(filepath.Join(opts.Cache.Dir, "staging"), slog.New(slog.DiscardHandler))
	err = build(withLease(ctx, l), g, want, opts, em, rec, ss)
	// What no later stage took (a build that stopped early, failed or was interrupted)
	// ends with the build, Ctrl-C or not.
	if cerr := ss.closeAll(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = cerr
	}
	rec.Finished = opts.Clock.Now()
	rec.Status = StatusSucceeded
	if err != nil {
		rec.Status = StatusFailed
		if ctx.Err() != nil {
			rec.Status = StatusInterrupted
		}
		rec.Error = err.Error()
	}
	if werr := rec.write(path); werr != nil && err == nil {
		err = werr
	}
	em.emit(Event{Kind: EventBuildDone, Message: rec.Status, Error: rec.Error, Duration: rec.Finished.Sub(rec.Started)})
	return rec, err
}

// build runs the stages in want, rewriting the (running) record after each one finishes.
func build(ctx context.Context, g *Graph, want map[string]bool, opts BuildOptions, em *emitter, rec *Record, ss *sessions) error {
	k, err := newKeyer(ctx, opts.Cache, opts.Secrets)
	if err != nil {
		return err
	}
	em.emit(Event{Kind: EventBuildStart, Message: fmt.Sprintf("%d of %d stages selected", len(want), len(g.Stages))})
	outputs := map[string]string{}
	for _, s := range g.Stages {
		if !want[s.Name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		in, err := k.inputs(s)
		if err != nil {
			return err
		}
		sr, err := runStage(ctx, s, in, outputs, opts, em, ss)
		sr.Recipe = k.recipes[s.Name]
		rec.Stages = append(rec.Stages, sr)
		if err != nil {
			return err
		}
		if err := rec.write(filepath.Join(opts.OutputDir, RecordFile)); err != nil {
			return err
		}
		k.outs[s.Name] = OutputDigest(sr.Artifacts, s.Reports...)
		outputs[s.Name] = sr.dir
		link := filepath.Join(opts.OutputDir, s.Name)
		os.Remove(link)
		if err := os.Symlink(sr.dir, link); err != nil {
			return fmt.Errorf("linking %s outputs into %s: %w", s.Name, opts.OutputDir, err)
		}
	}
	return nil
}

// changes says why a stage with these inputs has no cache entry: what differs from the
// inputs of the blueprint's last build of it.
func changes(c *Cache, blueprint string, in KeyInputs) []string {
	last, ok := c.lastInputs(blueprint, in.Stage)
	if !ok {
		return []string{"never built with this cache"}
	}
	if why := in.Diff(last); len(why) > 0 {
		return why
	}
	return []string{"inputs unchanged since the last build, but its cache entry is gone or was modified"}
}

// reasonsFor says why a stage is about to run, for the stage-start event.
func reasonsFor(c *Cache, blueprint string, s Stage, in KeyInputs, forced bool) string {
	switch {
	case forced:
		return "forced with --force"
	case s.Uncached:
		return "always runs"
	}
	return strings.Join(changes(c, blueprint, in), "; ")
}

func runStage(ctx context.Context, s Stage, in KeyInputs, outputs map[string]string, opts BuildOptions, em *emitter, ss *sessions) (StageRecord, error) {
	c := opts.Cache
	key := in.Key()
	start := opts.Clock.Now()
	sr := StageRecord{Name: s.Name, Key: key, Started: start}
	forced := slices.Contains(opts.Selection.Force, s.Name)
	since := func() Duration { return Duration(opts.Clock.Now().Sub(start)) }

	unlock, err := c.lock(ctx, key, func(lock string) {
		em.emit(Event{Kind: EventLog, Stage: s.Name, Message: WaitingForEntry + " (it holds " + lock + ")"})
	})
	if err != nil {
		return sr, err
	}
	defer unlock()
	// Another build may have made the entry while we waited for the lock.
	e, hit, expired, err := c.lookupFresh(s, key)
	if err != nil {
		return sr, err
	}
	if hit && !forced && !s.Uncached {
		sr.Cache, sr.dir, sr.Artifacts, sr.Tools, sr.Summary = "hit", e.Dir, e.Artifacts, e.Tools, e.Summary
		sr.Duration = since()
		em.emit(Event{Kind: EventStageHit, Stage: s.Name, Key: key, Cache: "hit", Duration: time.Duration(sr.Duration)})
		c.recordInputs(em.blueprint, s.Name, in)
		return sr, nil
	}
	sr.Cache = "miss"
	c.removeStale(s.Name, key)
	w, err := openWorkspace(ctx, c, s, key, opts, em)
	if err != nil {
		return sr, err
	}
	defer w.close()
	for _, d := range s.Deps {
		w.env.Inputs[d] = outputs[d]
	}
	w.env.sessions, w.env.sessionKind = ss, s.Session
	// A stage that will take over a handed-on session runs on that session's resources.
	release := func() {}
	if s.Session == "" || !ss.has(s.Session) {
		if release, err = acquire(ctx, s, opts, em); err != nil {
			return sr, err
		}
	}
	sr.Waited = since()
	em.emit(Event{Kind: EventStageStart, Stage: s.Name, Key: key, Message: cmp.Or(expired, reasonsFor(c, em.blueprint, s, in, forced))})
	runErr := w.run(ctx, s)
	id, serr := w.env.endSessions(context.WithoutCancel(ctx), runErr == nil, release)
	sr.Session = id
	if runErr == nil && serr != nil {
		runErr = serr
	}
	sr.Tools, sr.Summary = w.env.tools, w.env.summary
	if runErr != nil {
		sr.Duration = since()
		return sr, w.failed(ctx, runErr, &sr, opts.KeepOnError)
	}
	arts, stamps, err := artifacts(ctx, w.staged)
	if err != nil {
		return sr, fmt.Errorf("stage %s: listing outputs: %w", s.Name, err)
	}
	e, err = c.commit(w.staged, Entry{Stage: s.Name, Key: key, Inputs: in, Artifacts: arts, Tools: w.env.tools, Stamps: stamps, Summary: w.env.summary})
	if err != nil {
		return sr, err
	}
	c.recordInputs(em.blueprint, s.Name, in)
	sr.dir, sr.Artifacts = e.Dir, arts
	sr.Duration = since()
	em.emit(Event{Kind: EventStageDone, Stage: s.Name, Key: key, Cache: "miss", Duration: time.Duration(sr.Duration)})
	return sr, nil
}

// WaitingForEntry begins the log event of a stage waiting for another build (of this
// process or another) that holds its cache entry's lock; a depot shows it on its own log.
const WaitingForEntry = "waiting for another build making the same cache entry"

// acquire takes the stage's resources from the build's slots, saying so when it has to
// wait for them.
func acquire(ctx context.Context, s Stage, opts BuildOptions, em *emitter) (func(), error) {
	if opts.Slots == nil || s.Resources.IsZero() {
		return func() {}, nil
	}
	em.emit(Event{Kind: EventLog, Stage: s.Name, Message: "waiting for " + s.Resources.String()})
	release, err := opts.Slots.Acquire(ctx, em.blueprint+"/"+s.Name, s.Resources)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", s.Name, err)
	}
	return release, nil
}

// workspace is one run of a stage: its staging and scratch directories, its log and the
// Env it runs with.
type workspace struct {
	stage, key, staged, scratch string
	log                         *os.File
	red                         redactor
	env                         *Env
	em                          *emitter
	// keep leaves the staging directory in place (--keep-on-error).
	keep bool
}

func openWorkspace(ctx context.Context, c *Cache, s Stage, key string, opts BuildOptions, em *emitter) (*workspace, error) {
	w := &workspace{stage: s.Name, key: key, em: em}
	var err error
	if w.staged, err = c.stage(s.Name, key); err != nil {
		return nil, fmt.Errorf("stage %s: creating staging directory: %w", s.Name, err)
	}
	if w.scratch, err = c.scratch(s.Name, key); err != nil {
		w.close()
		return nil, fmt.Errorf("stage %s: creating scratch directory: %w", s.Name, err)
	}
	if w.red, err = newRedactor(opts.Secrets, s.Secrets); err != nil {
		w.close()
		return nil, fmt.Errorf("stage %s: %w", s.Name, err)
	}
	runDir, _ := filepath.Abs(opts.OutputDir)
	logPath := filepath.Join(runDir, "logs", s.Name+".log")
	if w.log, err = os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644); err != nil {
		w.close()
		return nil, fmt.Errorf("stage %s: opening log: %w", s.Name, err)
	}
	w.env = &Env{
		Out:         w.staged,
		Scratch:     w.scratch,
		Inputs:      map[string]string{},
		Shared:      func(name string) (string, error) { return c.shared(ctx, name) },
		Secrets:     opts.Secrets,
		Log:         slog.New(newStageLogHandler(w.red.writer(w.log), em, s.Name, w.red)),
		LogPath:     logPath,
		KeepOnError: opts.KeepOnError,
		RunDir:      runDir,
		tools:       map[string]string{},
		events:      em,
		stage:       s.Name,
	}
	return w, nil
}

// run runs the stage, then the cleanups of what it created (VMs, processes, scratch
// disks), whatever the outcome, before its outputs can be committed.
func (w *workspace) run(ctx context.Context, s Stage) error {
	runErr := safeRun(ctx, s, w.env)
	if cerr := w.env.cleanups.Run(); cerr != nil {
		w.env.Log.Warn("cleanup failed", "error", cerr.Error())
		if runErr == nil {
			runErr = cerr
		}
	}
	if runErr == nil {
		runErr = ctx.Err()
	}
	return runErr
}

// failed records a failed run: its redacted error, its log, and with keepOnError (unless
// the build was cancelled) the partial outputs.
func (w *workspace) failed(ctx context.Context, runErr error, sr *StageRecord, keepOnError bool) error {
	msg := w.red.string(runErr.Error())
	sr.Error, sr.LogPath = msg, w.env.LogPath
	if keepOnError && ctx.Err() == nil {
		w.keep = true
		sr.KeptDir = w.staged
	}
	w.em.emit(Event{Kind: EventStageFail, Stage: w.stage, Key: w.key, Error: msg, Duration: time.Duration(sr.Duration)})
	return &StageError{Stage: w.stage, LogPath: w.env.LogPath, KeptDir: sr.KeptDir, Err: runErr, msg: msg}
}

// close removes what the run leaves behind: the scratch directory always, the staging
// directory unless it was committed (then it is gone already) or kept.
func (w *workspace) close() {
	if w.log != nil {
		w.log.Close()
	}
	if w.scratch != "" {
		os.RemoveAll(w.scratch)
	}
	if !w.keep {
		os.RemoveAll(w.staged)
	}
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

// StageError is a failed stage: which one, why, and where its full log is.
type StageError struct {
	Stage   string
	LogPath string
	KeptDir string
	Err     error
	// msg is Err's text with the stage's secrets redacted.
	msg string
}

func (e *StageError) Error() string {
	text := e.msg
	if text == "" {
		text = e.Err.Error()
	}
	msg := fmt.Sprintf("stage %s failed: %s\nfull log: %s", e.Stage, text, e.LogPath)
	if e.KeptDir != "" {
		msg += "\npartial outputs kept in: " + e.KeptDir
	}
	return msg
}

func (e *StageError) Unwrap() error { return e.Err }
