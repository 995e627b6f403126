package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/test/testbin"
)

// copyDemo copies blueprints/demo.yaml and its fragments into a fresh directory so a test can
// edit them, and returns the copied blueprint's path.
func copyDemo(t *testing.T) string {
	t.Helper()
	bp, err := testbin.CopyDemo(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

type cliResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// testContext ends a minute before the test binary's -timeout: a command that hangs is
// then stopped (and its VMs with it) and reported by name, rather than the binary
// panicking. No command gets a deadline of its own that a slow or loaded machine could
// miss while working normally.
func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(context.Background(), d.Add(-time.Minute))
	}
	return context.WithCancel(context.Background())
}

func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, snofactoryBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running snofactory %v: %v", args, err)
	}
	return r
}

func loadRecord(t *testing.T, outDir string) *pipeline.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(outDir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := pipeline.ReadRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stageCache(r *pipeline.Record) map[string]string {
	m := map[string]string{}
	for _, s := range r.Stages {
		m[s.Name] = s.Cache
	}
	return m
}

// TestBuildUntilRenderCachesAndRebuildsOnlyWhatChanged is the foundation's acceptance test:
// a second build is a cache hit for every stage (its speed is make bench's to measure), and
// editing one Butane fragment re-runs render and nothing upstream of it.
func TestBuildUntilRenderCachesAndRebuildsOnlyWhatChanged(t *testing.T) {
	bp := demoBlueprint(t)
	cache := t.TempDir()
	build := func() (cliResult, *pipeline.Record) {
		out := t.TempDir()
		r := runCLI(t, "build", bp, "--until", "render", "--cache-dir", cache, "--output-dir", out, "--progress", "plain")
		if r.code != 0 {
			t.Fatalf("build exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		return r, loadRecord(t, out)
	}
	_, first := build()
	if got := stageCache(first)["render"]; got != "miss" {
		t.Fatalf("first build: render %q", got)
	}
	_, rec := build()
	for name, c := range stageCache(rec) {
		if c != "hit" {
			t.Errorf("second build: stage %s was %s", name, c)
		}
	}
	if len(rec.Stages) != len(first.Stages) {
		t.Errorf("second build ran stages %v, the first %v", stageCache(rec), stageCache(first))
	}

	// Edit one fragment file: render re-runs, nothing upstream of it does.
	frag := firstFragmentFile(t, bp)
	b, _ := os.ReadFile(frag)
	os.WriteFile(frag, append(b, []byte("\n# edited by the test\n")...), 0o644)
	plan := runCLI(t, "plan", bp, "--until", "render", "--cache-dir", cache, "--output", "json")
	if plan.code != 0 {
		t.Fatalf("plan: %s", plan.stderr)
	}
	if !strings.Contains(plan.stdout, "changed") {
		t.Errorf("plan does not say what changed: %s", plan.stdout)
	}
	_, third := build()
	for name, c := range stageCache(third) {
		want := "hit"
		if name == "render" {
			want = "miss"
		}
		if c != want {
			t.Errorf("after editing a fragment: stage %s was %s, want %s", name, c, want)
		}
	}
}

// firstFragmentFile finds the first Butane file the blueprint references (the demo has one).
func firstFragmentFile(t *testing.T, bp string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(bp), "demo", "*.bu"))
	if len(matches) == 0 {
		t.Fatal("the demo blueprint has no Butane file fragment under blueprints/demo/")
	}
	return matches[0]
}

// TestKilledBuildsLeaveNoCorruptEntry kills --force rebuilds with SIGKILL at every event
// they emit, all into one output directory that starts with a successful build's record,
// then checks every committed cache entry is whole (its record's digests match its files),
// that the record a killed build leaves says "running" (never the earlier build's
// "succeeded"), and that a re-run completes and leaves no temporary record files. The kill
// points are the build's own events (--progress json), not delays, so every round lands at
// the same place on any machine.
func TestKilledBuildsLeaveNoCorruptEntry(t *testing.T) {
	bp := demoBlueprint(t)
	cache, out := t.TempDir(), t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "render", "--cache-dir", cache, "--output-dir", out); r.code != 0 {
		t.Fatalf("first build: exit %d: %s", r.code, r.stderr)
	}
	frag := firstFragmentFile(t, bp)
	orig, _ := os.ReadFile(frag)
	killed, running, rounds := 0, 0, 0
	// round kills a rebuild once it has emitted n events; it reports whether the build
	// ended by itself first (n is past its last event).
	round := func(n int) (ended bool) {
		// A different fragment each round so render really runs every time.
		rounds++
		os.WriteFile(frag, append(append([]byte{}, orig...), fmt.Appendf(nil, "\n# round %d\n", rounds)...), 0o644)
		started := time.Now()
		cmd := exec.Command(snofactoryBin, "build", bp, "--until", "render", "--force", "render", "--cache-dir", cache, "--output-dir", out, "--progress", "json")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		events, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(events)
		seen := 0
		for seen < n && sc.Scan() {
			seen++
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		go io.Copy(io.Discard, events)
		if err := cmd.Wait(); err != nil {
			killed++
			if killedRecordIsRunning(t, out, started) {
				running++
			}
		}
		checkCacheWhole(t, cache)
		return seen < n
	}
	for n := 0; !round(n); n++ {
	}
	t.Logf("%d of %d builds killed while running, %d after writing their record", killed, rounds, running)
	// The test means nothing if every build finished before its kill, or none was killed
	// after it wrote its record.
	if killed < 3 || running < 1 {
		t.Fatalf("%d of %d builds were killed while running, %d of them after writing their record", killed, rounds, running)
	}
	r := runCLI(t, "build", bp, "--until", "render", "--cache-dir", cache, "--output-dir", out)
	if r.code != 0 {
		t.Fatalf("re-run after kills: exit %d: %s", r.code, r.stderr)
	}
	if loadRecord(t, out).Status != pipeline.StatusSucceeded {
		t.Fatal("re-run did not succeed")
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".tmp-"+pipeline.RecordFile+"-*")); len(left) != 0 {
		t.Fatalf("temporary record files left after the re-run: %v", left)
	}
	checkCacheWhole(t, cache)
}

// killedRecordIsRunning checks the record a SIGKILLed build left in out: one it wrote (it
// started after started) says running and lists only stages that finished, in order, or, if
// the kill came after the end, succeeded. An older record means the build was killed before it
// began. It reports whether the record is the killed build's and says running.
func killedRecordIsRunning(t *testing.T, out string, started time.Time) bool {
	t.Helper()
	rec := loadRecord(t, out)
	if rec.Started.Before(started) {
		return false
	}
	switch rec.Status {
	case pipeline.StatusSucceeded:
		return false
	case pipeline.StatusRunning:
		if !rec.Finished.IsZero() || len(rec.Stages) > 2 || (len(rec.Stages) > 0 && rec.Stages[0].Name != "resolve") {
			t.Errorf("a killed build's running record: finished %v, stages %v", rec.Finished, stageCache(rec))
		}
		return true
	}
	t.Errorf("a killed build's record says %q", rec.Status)
	return false
}

// checkCacheWhole verifies every committed entry against its record.
func checkCacheWhole(t *testing.T, cache string) {
	t.Helper()
	records, _ := filepath.Glob(filepath.Join(cache, "entries", "*", "*.json"))
	for _, rec := range records {
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		var e pipeline.Entry
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("corrupt entry record %s: %v", rec, err)
		}
		dir := strings.TrimSuffix(rec, ".json")
		for _, a := range e.Artifacts {
			f, err := os.Open(filepath.Join(dir, a.Path))
			if err != nil {
				t.Fatalf("entry %s lost artifact %s: %v", dir, a.Path, err)
			}
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			if hex.EncodeToString(h.Sum(nil)) != a.SHA256 {
				t.Fatalf("entry %s artifact %s does not match its record", dir, a.Path)
			}
		}
	}
}
