package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killGraph has a stage that writes part of its output and, in the child process, says so on
// stdout (the parent reads it through a pipe) and hangs until it is killed.
func killGraph(hang bool) *Graph {
	return &Graph{Blueprint: "kill", Stages: []Stage{
		{Name: "first", Version: "1", Run: func(ctx context.Context, env *Env) error {
			return os.WriteFile(filepath.Join(env.Out, "f"), []byte("first"), 0o644)
		}},
		{Name: "render", Version: "1", Deps: []string{"first"}, Run: func(ctx context.Context, env *Env) error {
			if err := os.WriteFile(filepath.Join(env.Out, "partial.ign"), []byte("{"), 0o644); err != nil {
				return err
			}
			if hang {
				fmt.Println(renderRunning)
				time.Sleep(time.Hour) // a hang, not a wait: the parent kills us
			}
			return os.WriteFile(filepath.Join(env.Out, "partial.ign"), []byte("{}"), 0o644)
		}},
	}}
}

// renderRunning is the child's line once its render stage has written part of its output.
const renderRunning = "render stage running"

func TestMain(m *testing.M) {
	if os.Getenv(toolChildEnv) != "" {
		os.Exit(toolChild())
	}
	if dir := os.Getenv("PIPELINE_TEST_KILL_CHILD"); dir != "" {
		_, err := Build(context.Background(), killGraph(true), BuildOptions{
			Cache: &Cache{Dir: filepath.Join(dir, "cache")}, OutputDir: filepath.Join(dir, "out"),
			Selection: Selection{Force: []string{"render"}}})
		fmt.Fprintln(os.Stderr, "child build returned:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestKill9DuringStageThenResume(t *testing.T) {
	dir := t.TempDir()
	// The output directory first holds an earlier successful build's record (made with another
	// cache, so the killed build's cache starts empty).
	out := filepath.Join(dir, "out")
	if _, err := Build(context.Background(), killGraph(false), BuildOptions{Cache: &Cache{Dir: t.TempDir()}, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PIPELINE_TEST_KILL_CHILD="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child's line is the event; a child that dies first closes the pipe instead.
	if line, err := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != renderRunning {
		cmd.Process.Kill()
		t.Fatalf("child never reached the render stage: %q %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	cache := &Cache{Dir: filepath.Join(dir, "cache")}
	if e, _ := filepath.Glob(filepath.Join(cache.Dir, "entries", "render", "*")); len(e) != 0 {
		t.Fatalf("killed stage left a cache entry: %v", e)
	}
	// The killed build's record says it never finished and how far it got, not the earlier
	// build's "succeeded".
	if r := readRecord(t, out); r.Status != StatusRunning || cacheStates(r) != "first=miss" {
		t.Fatalf("record after kill -9: status %q stages %q, want running with first=miss", r.Status, cacheStates(r))
	}
	// A kill during a record write leaves its temporary file; the next build removes it.
	stale := filepath.Join(out, ".tmp-"+RecordFile+"-4242")
	if err := os.WriteFile(stale, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), killGraph(false), BuildOptions{Cache: cache, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	r := readRecord(t, out)
	if got := cacheStates(r); got != "first=hit render=miss" {
		t.Fatalf("resume: %s", got)
	}
	b, err := os.ReadFile(filepath.Join(out, "render", "partial.ign"))
	if err != nil || string(b) != "{}" {
		t.Fatalf("render output %q %v", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(cache.Dir, "staging", "*")); len(left) != 0 {
		t.Fatalf("stale staging dirs not cleaned: %v", left)
	}
	if r.Status != StatusSucceeded {
		t.Fatalf("resume record: %q", r.Status)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Fatal("the resumed build left the killed build's temporary record")
	}
}
