package depot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/flock"
)

// StatusFile is the depot's status in its output directory, kept current while it runs.
const StatusFile = "depot.json"

// MaxStatusFile bounds the status file depot status reads: a record of a few hundred bytes
// per build, so 16 MiB is tens of thousands of builds; a larger file is not ours.
const MaxStatusFile = 16 << 20

// Build is one blueprint of the depot.
type Build struct {
	// Name names the build's output directory; unique in the depot.
	Name      string `json:"name"`
	Blueprint string `json:"blueprint"`
}

// Loader turns a blueprint path into its stage graph and secrets.
type Loader func(path string) (*pipeline.Graph, pipeline.SecretSource, error)

// Config is one depot run.
type Config struct {
	Builds    []Build
	Load      Loader
	Cache     *pipeline.Cache
	OutputDir string
	Selection pipeline.Selection
	// Slots is shared by every build (nil: no limit).
	Slots pipeline.Slots
	// MaxParallel caps the builds in flight (default 4).
	MaxParallel int
	// MinFreeBytes holds new builds back while the cache's filesystem has less free space.
	MinFreeBytes uint64
	// Attempts per build for transient failures (default 3), the first retry after Backoff
	// (default 10s), doubling.
	Attempts int
	Backoff  time.Duration
	Log      *slog.Logger
	// freeBytes measures free space and watermarkPoll is how often; tests replace them.
	freeBytes     func(dir string) (uint64, error)
	watermarkPoll time.Duration
}

// Build statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	// StatusInterrupted is a depot (and its unfinished builds) whose process is gone.
	StatusInterrupted = "interrupted"
	// StatusCancelled is a build on Tekton whose PipelineRun was cancelled.
	StatusCancelled = "cancelled"
)

// LockFile, in a depot's output directory, is held (flock) by the depot running there; its
// content is that process's PID. A status that says running while nobody holds it was
// left by a depot that died.
const LockFile = "depot.lock"

// BusyError refuses a second depot on an output directory that one is running in.
type BusyError struct {
	Dir, Holder string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("another depot (pid %s) is running in %s: wait for it, or give this one another --output-dir", e.Holder, e.Dir)
}

// Result is one build's outcome.
type Result struct {
	Build
	Status      string                 `json:"status"`
	Attempts    int                    `json:"attempts"`
	FailedStage string                 `json:"failedStage,omitempty"`
	Error       string                 `json:"error,omitempty"`
	OutputDir   string                 `json:"outputDir"`
	Log         string                 `json:"log"`
	Started     time.Time              `json:"started,omitzero"`
	Finished    time.Time              `json:"finished,omitzero"`
	Stages      []pipeline.StageRecord `json:"stages,omitempty"`
	// A build run on Tekton (depot run --tekton): its PipelineRun and that run's results.
	PipelineRun string `json:"pipelineRun,omitempty"`
	ImageURL    string `json:"imageURL,omitempty"`
	ImageDigest string `json:"imageDigest,omitempty"`
}

// Summary is the depot run: StatusFile and the reports.
type Summary struct {
	Status   string    `json:"status"` // running, succeeded (every build) or failed
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Builds   []Result  `json:"builds"`
	// Tekton is where a depot run on Tekton runs its PipelineRuns; depot status reads them.
	Tekton *TektonRun `json:"tekton,omitempty"`
}

// TektonRun names a depot's PipelineRuns: in Namespace, labelled snofactory.io/depot=Depot.
// Kubeconfig is the absolute path of the kubeconfig the run was given, if one was named
// (a path, never its content), so depot status asks the same cluster.
type TektonRun struct {
	Namespace  string `json:"namespace"`
	Depot      string `json:"depot"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// Counts tallies builds by status and stages by cache outcome.
func (s *Summary) Counts() (byStatus map[string]int, hits, misses int) {
	byStatus = map[string]int{}
	for _, b := range s.Builds {
		byStatus[b.Status]++
		for _, st := range b.Stages {
			switch st.Cache {
			case "hit":
				hits++
			case "miss":
				misses++
			}
		}
	}
	return byStatus, hits, misses
}

// Run runs every build, continuing past failures, and returns the summary; the error is
// for a depot that could not run at all (or was interrupted).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Builds) == 0 {
		// A depot of nothing would report success: its target named no blueprint.
		return nil, badinput.Errorf("depot: nothing to build")
	}
	if err := checkNames(cfg.Builds); err != nil {
		return nil, err
	}
	// The depot rewrites its output directory and every build's under it; a cache there, or
	// an output inside the cache, would have one clean out the other.
	if cfg.Cache != nil {
		if err := output.CheckApart(output.Named{Flag: "--output-dir", Path: cfg.OutputDir}, output.Named{Flag: "--cache-dir", Path: cfg.Cache.Dir}); err != nil {
			return nil, badinput.Wrap(err)
		}
	}
	if err := checkWatermark(cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutputDir, 0o755); err != nil {
		return nil, fmt.Errorf("depot output directory: %w", err)
	}
	lock, err := lockOutput(cfg.OutputDir)
	if err != nil {
		return nil, err
	}
	defer lock.Close() // releases the flock
	sum := &Summary{Status: StatusRunning, Started: time.Now()}
	for _, b := range cfg.Builds {
		out := filepath.Join(cfg.OutputDir, "builds", b.Name)
		sum.Builds = append(sum.Builds, Result{Build: b, Status: StatusQueued, OutputDir: out, Log: filepath.Join(out, "depot.log")})
	}
	rec, err := NewRecord(cfg.OutputDir, sum, cfg.Log)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, rec: rec}
	sem := make(chan struct{}, cfg.MaxParallel)
	var wg sync.WaitGroup
	for i := range sum.Builds {
		if err := r.admit(ctx, sem); err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.run(ctx, i)
		}()
	}
	wg.Wait()
	return rec.Finish(ctx)
}

func (c Config) withDefaults() Config {
	if c.MaxParallel <= 0 {
		c.MaxParallel = 4
	}
	if c.Attempts <= 0 {
		c.Attempts = 3
	}
	if c.Backoff <= 0 {
		c.Backoff = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.freeBytes == nil {
		c.freeBytes = freeBytes
	}
	if c.watermarkPoll <= 0 {
		c.watermarkPoll = 5 * time.Second
	}
	return c
}

func checkNames(builds []Build) error {
	seen := map[string]string{}
	for _, b := range builds {
		if prev, dup := seen[b.Name]; dup {
			return fmt.Errorf("depot: builds %s and %s have the same name %q: names must be unique", prev, b.Blueprint, b.Name)
		}
		seen[b.Name] = b.Blueprint
	}
	return nil
}

// runner is one depot run's state.
type runner struct {
	cfg Config
	rec *Record
}

// admit waits for a build slot and for the disk watermark.
func (r *runner) admit(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	warned := false
	for r.cfg.MinFreeBytes > 0 {
		free, err := r.cfg.freeBytes(r.cfg.Cache.Dir)
		if err != nil || free >= r.cfg.MinFreeBytes {
			return nil
		}
		if !warned {
			r.cfg.Log.Warn("depot paused: the cache's disk is below its watermark; new builds wait (prune the cache: snofactory cache prune)",
				"free_bytes", free, "watermark_bytes", r.cfg.MinFreeBytes)
			warned = true
		}
		select {
		case <-time.After(r.cfg.watermarkPoll):
		case <-ctx.Done():
			<-sem
			return ctx.Err()
		}
	}
	return nil
}

// run runs build i, retrying transient failures with backoff.
func (r *runner) run(ctx context.Context, i int) {
	r.rec.Update(i, func(b *Result) { b.Status, b.Started = StatusRunning, time.Now() })
	backoff := r.cfg.Backoff
	for attempt := 1; ; attempt++ {
		rec, err := r.attempt(ctx, i)
		r.rec.Update(i, func(b *Result) {
			b.Attempts = attempt
			if rec != nil {
				b.Stages = rec.Stages
			}
		})
		if err == nil {
			r.rec.Update(i, func(b *Result) { b.Status, b.Finished, b.Error, b.FailedStage = StatusSucceeded, time.Now(), "", "" })
			return
		}
		if attempt >= r.cfg.Attempts || !Transient(err) || ctx.Err() != nil {
			r.rec.Update(i, func(b *Result) {
				b.Status, b.Finished, b.Error = StatusFailed, time.Now(), err.Error()
				var se *pipeline.StageError
				if errors.As(err, &se) {
					b.FailedStage = se.Stage
				}
			})
			return
		}
		r.cfg.Log.Warn("transient failure; retrying the build", "build", r.rec.Build(i).Name, "attempt", attempt, "in", backoff.String(), "error", err.Error())
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff *= 2
	}
}

// attempt is one try of build i: its own output directory and log, the shared cache.
func (r *runner) attempt(ctx context.Context, i int) (*pipeline.Record, error) {
	b := r.rec.Build(i)
	if err := os.MkdirAll(b.OutputDir, 0o755); err != nil {
		return nil, err
	}
	g, secrets, err := r.cfg.Load(b.Blueprint)
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(b.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	enc := json.NewEncoder(logf)
	var mu sync.Mutex
	sink := pipeline.SinkFunc(func(e pipeline.Event) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(e)
		if e.Kind == pipeline.EventLog && strings.HasPrefix(e.Message, pipeline.WaitingForEntry) {
			// Only the build's log would say why it stands still.
			r.cfg.Log.Info(e.Message, "build", b.Name, "stage", e.Stage)
		}
	})
	return pipeline.Build(ctx, g, pipeline.BuildOptions{Cache: r.cfg.Cache, OutputDir: b.OutputDir, Selection: r.cfg.Selection,
		Secrets: secrets, Sink: sink, Slots: r.cfg.Slots})
}

// SaveStatus writes sum as dir's StatusFile, for a depot run elsewhere (on Tekton).
func SaveStatus(dir string, sum *Summary) error {
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, StatusFile), append(b, '\n'))
}

// Lock takes dir's lock as a running depot, or says which depot holds it: depot status
// tells a running depot from one that died by it.
func Lock(dir string) (io.Closer, error) { return lockOutput(dir) }

// lockOutput takes the output directory's lock, or says which depot holds it.
func lockOutput(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the depot output directory: %w", err)
	}
	if ok, err := flock.TryLock(f); !ok {
		holder, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if err == nil {
			return nil, &BusyError{Dir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("locking the depot output directory: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// running tells whether a depot holds dir's lock now.
func running(dir string) bool {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	ok, err := flock.TryShared(f)
	return !ok && err == nil
}

// ReadStatus reads a depot's status file (while it runs or after). A status that says
// running while no depot holds the directory's lock is reported as interrupted, and so
// are the builds it left running or queued.
func ReadStatus(dir string) (*Summary, error) {
	// A depot writes its status file itself, by renaming: a symlink there was put there by
	// someone else, and following it would read (and print) whatever it points at.
	b, err := smallfile.ReadNoFollow(filepath.Join(dir, StatusFile), MaxStatusFile)
	if errors.Is(err, smallfile.ErrSymlink) {
		return nil, badinput.Errorf("depot status %s: is a symlink; a depot's status file is never one, and is not followed",
			filepath.Join(dir, StatusFile))
	}
	if err != nil {
		return nil, fmt.Errorf("depot status: %w", err)
	}
	var s Summary
	if err := strictjson.Decode(b, &s); err != nil {
		return nil, fmt.Errorf("depot status %s: %w", filepath.Join(dir, StatusFile), err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("depot status %s: %w", filepath.Join(dir, StatusFile), err)
	}
	if s.Status == StatusRunning && !running(dir) {
		s.Status = StatusInterrupted
		for i := range s.Builds {
			if st := s.Builds[i].Status; st == StatusRunning || st == StatusQueued {
				s.Builds[i].Status = StatusInterrupted
			}
		}
	}
	return &s, nil
}

// check refuses a record no depot wrote ({} or a stranger's JSON): one that says nothing
// would otherwise be shown as a depot that did nothing and exit 0.
func (s *Summary) check() error {
	switch s.Status {
	case StatusRunning, StatusSucceeded, StatusFailed, StatusInterrupted:
	default:
		return fmt.Errorf("not a depot record: status %q is none of %s, %s, %s, %s", s.Status,
			StatusRunning, StatusSucceeded, StatusFailed, StatusInterrupted)
	}
	if s.Started.IsZero() {
		return errors.New("not a depot record: it has no start time")
	}
	for i, b := range s.Builds {
		switch b.Status {
		case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusInterrupted, StatusCancelled:
		default:
			return fmt.Errorf("not a depot record: builds[%d] has status %q", i, b.Status)
		}
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// checkWatermark refuses a --min-free the cache's disk can never meet: the depot would
// wait forever.
func checkWatermark(cfg Config) error {
	if cfg.MinFreeBytes == 0 || cfg.Cache == nil {
		return nil
	}
	dir := cfg.Cache.Dir
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // measured again while running
	}
	if total := st.Blocks * uint64(st.Bsize); cfg.MinFreeBytes > total {
		return badinput.Errorf("the free-space watermark (%d bytes) is more than the cache's disk holds in all (%d bytes, %s): no build could ever start; lower --min-free",
			cfg.MinFreeBytes, total, dir)
	}
	return nil
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
