package depot

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
)

// fakeDepot builds graphs of two stages: "shared" (the same key in every build whose name
// starts with "same", so the cache builds it once) and "vm" (holds a VM slot for a while).
type fakeDepot struct {
	sharedRuns atomic.Int32
	vmNow      atomic.Int32
	vmMax      atomic.Int32
	flaky      atomic.Int32 // failures left for the "flaky" build
}

func (f *fakeDepot) load(path string) (*pipeline.Graph, pipeline.SecretSource, error) {
	name := filepath.Base(path)
	if name == "unloadable" {
		return nil, nil, errors.New("blueprint unloadable: bad input")
	}
	shared := name
	if strings.HasPrefix(name, "same") {
		shared = "same"
	}
	g := &pipeline.Graph{Blueprint: name, Stages: []pipeline.Stage{
		{Name: "shared", Version: "1", Options: shared, Run: func(ctx context.Context, env *pipeline.Env) error {
			f.sharedRuns.Add(1)
			// Lets same-a and same-b overlap on this stage; no assertion depends on it (the
			// cache runs the stage once whether they overlap or queue).
			time.Sleep(50 * time.Millisecond)
			return os.WriteFile(filepath.Join(env.Out, "x"), []byte(shared), 0o644)
		}},
		{Name: "vm", Version: "1", Options: name, Deps: []string{"shared"}, Resources: pipeline.Resources{VMs: 1, CPUs: 1},
			Run: func(ctx context.Context, env *pipeline.Env) error {
				n := f.vmNow.Add(1)
				defer f.vmNow.Add(-1)
				for {
					m := f.vmMax.Load()
					if n <= m || f.vmMax.CompareAndSwap(m, n) {
						break
					}
				}
				// Holds the slot so VM stages overlap and the pool's limit is exercised; the
				// assertion (at most 2 at once) holds with or without overlap.
				time.Sleep(100 * time.Millisecond)
				switch {
				case name == "broken":
					return errors.New("the guest reported install-complete failed")
				case name == "flaky" && f.flaky.Add(-1) >= 0:
					return fmt.Errorf("pulling: %w", syscall.ECONNRESET)
				}
				return os.WriteFile(filepath.Join(env.Out, "disk"), []byte(name), 0o644)
			}},
	}}
	return g, pipeline.SecretSet{}, nil
}

func TestDepot(t *testing.T) {
	f := &fakeDepot{}
	f.flaky.Store(1)
	out := t.TempDir()
	var builds []Build
	for _, n := range []string{"same-a", "same-b", "broken", "flaky", "unloadable", "other"} {
		builds = append(builds, Build{Name: n, Blueprint: "/blueprints/" + n})
	}
	sum, err := Run(context.Background(), Config{
		Builds: builds, Load: f.load, Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out,
		Slots: pipeline.NewPool(pipeline.Resources{VMs: 2}), MaxParallel: 6, Backoff: 10 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, b := range sum.Builds {
		got[b.Name] = b
	}
	for name, want := range map[string]string{"same-a": StatusSucceeded, "same-b": StatusSucceeded, "broken": StatusFailed,
		"flaky": StatusSucceeded, "unloadable": StatusFailed, "other": StatusSucceeded} {
		if got[name].Status != want {
			t.Errorf("%s: %s (%s), want %s", name, got[name].Status, got[name].Error, want)
		}
	}
	if b := got["broken"]; b.FailedStage != "vm" || b.Attempts != 1 || !strings.Contains(b.Error, "install-complete failed") {
		t.Errorf("broken: %+v; want failed at vm, not retried", b)
	}
	if b := got["flaky"]; b.Attempts != 2 {
		t.Errorf("flaky: %d attempts, want a retry after the reset connection", b.Attempts)
	}
	// same-a and same-b share the stage: one run; broken, flaky, unloadable... each their own.
	if n := f.sharedRuns.Load(); n != 4 {
		t.Errorf("shared stage ran %d times, want 4 (once for same-a/same-b, broken, flaky, other)", n)
	}
	if m := f.vmMax.Load(); m > 2 || m < 1 {
		t.Errorf("%d VM stages ran at once with 2 slots", m)
	}
	if sum.Status != StatusFailed {
		t.Errorf("depot status %s with failed builds", sum.Status)
	}
	st, err := ReadStatus(out)
	if err != nil || len(st.Builds) != 6 || st.Status != StatusFailed {
		t.Errorf("status file: %+v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(out, "builds", "same-a", pipeline.RecordFile)); err != nil {
		t.Errorf("per-build output: %v", err)
	}

	var ju struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	b, _ := os.ReadFile(filepath.Join(out, JUnitFile))
	if err := xml.Unmarshal(b, &ju); err != nil || len(ju.Suites) != 1 || len(ju.Suites[0].Cases) != 6 {
		t.Fatalf("junit %s: %v", b, err)
	}
	for _, c := range ju.Suites[0].Cases {
		if (c.Failure != nil) != (got[c.Name].Status == StatusFailed) {
			t.Errorf("junit case %s: failure %+v", c.Name, c.Failure)
		}
		if c.Name == "broken" && (c.Failure == nil || c.Failure.Message != "broken failed at vm") {
			t.Errorf("junit broken: %+v", c.Failure)
		}
	}
	html, _ := os.ReadFile(filepath.Join(out, HTMLFile))
	for _, want := range []string{`class="bar bar-miss" data-stage="vm"`, `class="bar bar-hit"`, `class="bar bar-failed" data-stage="vm"`, "broken", "builds/broken/"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// The watermark holds new builds back until the disk has room again.
func TestDepotWaitsForDiskSpace(t *testing.T) {
	f := &fakeDepot{}
	// The disk has room from the third measurement on; the build must not load before.
	var polls atomic.Int32
	var room atomic.Bool
	load := func(path string) (*pipeline.Graph, pipeline.SecretSource, error) {
		if !room.Load() {
			t.Error("the build started while the disk was below the watermark")
		}
		return f.load(path)
	}
	cfg := Config{Builds: []Build{{Name: "other", Blueprint: "/b/other"}}, Load: load, Cache: &pipeline.Cache{Dir: t.TempDir()},
		OutputDir: t.TempDir(), MinFreeBytes: 1 << 30, Log: slog.New(slog.DiscardHandler)}
	cfg.freeBytes = func(string) (uint64, error) {
		if polls.Add(1) < 3 {
			return 0, nil
		}
		room.Store(true)
		return 10 << 30, nil
	}
	cfg.watermarkPoll = time.Nanosecond // the test counts polls, it does not wait for them
	sum, err := Run(context.Background(), cfg)
	if err != nil || sum.Builds[0].Status != StatusSucceeded {
		t.Fatalf("%+v, %v", sum, err)
	}
	if n := polls.Load(); n < 3 {
		t.Errorf("the disk was measured %d times, want the depot to wait for room (3)", n)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", syscall.ECONNREFUSED), true},
		{errors.New("stage precache failed: reading blob: 503 Service Unavailable"), true},
		{errors.New("toomanyrequests: rate limit"), true},
		{errors.New("validation failed: host.images.present"), false},
		{errors.New("blueprint: spec.vm.cpus must be positive"), false},
		{nil, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v", tc.err, got)
		}
	}
}

// One depot per output directory: a second is refused naming the first. A status left
// "running" by a depot that is gone reads as interrupted, with its unfinished builds.
func TestDepotLockAndInterrupted(t *testing.T) {
	out := t.TempDir()
	held, err := lockOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDepot{}
	_, err = Run(context.Background(), Config{Builds: []Build{{Name: "other", Blueprint: "/b/other"}}, Load: f.load,
		Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out, Log: slog.New(slog.DiscardHandler)})
	var busy *BusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("a second depot on %s: %v, want refused naming the first", out, err)
	}

	left := Summary{Status: StatusRunning, Started: time.Now(), Builds: []Result{
		{Build: Build{Name: "a"}, Status: StatusSucceeded}, {Build: Build{Name: "b"}, Status: StatusRunning}, {Build: Build{Name: "c"}, Status: StatusQueued}}}
	b, _ := json.Marshal(left)
	os.WriteFile(filepath.Join(out, StatusFile), b, 0o644)
	if s, err := ReadStatus(out); err != nil || s.Status != StatusRunning {
		t.Fatalf("while the depot holds its lock: %+v, %v; want running", s, err)
	}
	held.Close() // the depot dies
	s, err := ReadStatus(out)
	if err != nil || s.Status != StatusInterrupted || s.Builds[0].Status != StatusSucceeded ||
		s.Builds[1].Status != StatusInterrupted || s.Builds[2].Status != StatusInterrupted {
		t.Fatalf("after the depot died: %+v, %v; want interrupted", s, err)
	}
}

// A watermark the cache's disk can never meet is refused at the start, not waited on.
func TestDepotRefusesUnmeetableWatermark(t *testing.T) {
	f := &fakeDepot{}
	_, err := Run(context.Background(), Config{Builds: []Build{{Name: "other", Blueprint: "/b/other"}}, Load: f.load,
		Cache: &pipeline.Cache{Dir: filepath.Join(t.TempDir(), "cache")}, OutputDir: t.TempDir(), MinFreeBytes: 1 << 62,
		Log: slog.New(slog.DiscardHandler)})
	var ie *badinput.Error
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "no build could ever start") {
		t.Fatalf("err = %v, want the watermark refused", err)
	}
}

// A depot stopped by Ctrl-C records itself and its unfinished builds as interrupted, not
// failed: nothing about them is wrong, and run again it finishes them.
func TestRunStoppedByCtrlCIsInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := t.TempDir()
	load := func(path string) (*pipeline.Graph, pipeline.SecretSource, error) {
		return &pipeline.Graph{Blueprint: filepath.Base(path), Stages: []pipeline.Stage{{Name: "s", Version: "1", Options: path,
			Run: func(ctx context.Context, env *pipeline.Env) error {
				cancel() // Ctrl-C while the first build runs
				<-ctx.Done()
				return ctx.Err()
			}}}}, pipeline.SecretSet{}, nil
	}
	sum, err := Run(ctx, Config{
		Builds: []Build{{Name: "a", Blueprint: "/b/a"}, {Name: "b", Blueprint: "/b/b"}}, Load: load,
		Cache: &pipeline.Cache{Dir: t.TempDir()}, OutputDir: out, MaxParallel: 1, Log: slog.New(slog.DiscardHandler),
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	st, rerr := ReadStatus(out)
	for _, s := range []*Summary{sum, st} {
		if rerr != nil || s.Status != StatusInterrupted || s.Builds[0].Status != StatusInterrupted || s.Builds[1].Status != StatusInterrupted {
			t.Fatalf("summary %+v (%v): want the depot and both builds interrupted", s, rerr)
		}
	}
}
