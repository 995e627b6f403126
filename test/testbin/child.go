package testbin

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ChildMemory is the most a child the tests start may map as data: about 8 times the heap
// snofactory's commands keep to (diskpack.HeapLimit, 128 MiB), and far less than a crafted
// input that makes a command grow without bound would take before the machine runs out.
//
// The limit is RLIMIT_DATA, set by util-linux prlimit(1) before it executes the command, so
// nothing runs unlimited. RLIMIT_DATA, not RLIMIT_AS: since Linux 4.7 it counts the private
// writable mappings (the heap the Go runtime has committed) and not the address space the
// runtime only reserves (PROT_NONE arenas and page summaries, over 1 GiB before main runs),
// so the bound is on what the command uses. Setting it with prlimit(2) on the child after
// Start would leave the child unlimited for a moment; setting it on the test process itself
// would limit every test running beside it.
const ChildMemory = 1 << 30

// LazyBinary builds snofactory the first time a test asks for it, so a package whose tests
// mostly run in-process builds only when a test that starts the real binary runs. Remove
// it from TestMain after m.Run.
type LazyBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// Path builds (once) and returns the binary, failing the test when the build fails.
func (l *LazyBinary) Path(t testing.TB) string {
	t.Helper()
	l.once.Do(func() {
		if l.dir, l.err = os.MkdirTemp("", "snofactory-test-bin-"); l.err == nil {
			l.path, l.err = Binary(l.dir)
		}
	})
	if l.err != nil {
		t.Fatalf("building snofactory: %v", l.err)
	}
	return l.path
}

// Remove deletes what Path built.
func (l *LazyBinary) Remove() {
	if l.dir != "" {
		os.RemoveAll(l.dir)
	}
}

// Child is the real binary running under a test: in its own process group, with its memory
// limited to ChildMemory, its output kept, and a marker in its environment that every
// process it starts inherits, so the test can find any it leaves behind.
type Child struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *Output
	marker         string
	done           chan struct{}
	code           int
}

// StartChild starts bin with args. setup, if not nil, adjusts the command before it starts
// (stdin, extra environment, working directory). The child is killed, with its group, when
// the test ends.
func StartChild(t testing.TB, bin string, args []string, setup func(*exec.Cmd)) *Child {
	t.Helper()
	prlimit := Require(t, "prlimit", "util-linux")
	c := &Child{Stdout: &Output{}, Stderr: &Output{}, done: make(chan struct{})}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		t.Fatal(err)
	}
	c.marker = fmt.Sprintf("SNOFACTORY_TEST_CHILD=%x", nonce)
	lim := strconv.Itoa(ChildMemory)
	c.Cmd = exec.Command(prlimit, append([]string{"--data=" + lim + ":" + lim, "--", bin}, args...)...)
	c.Cmd.Env = append(os.Environ(), c.marker)
	c.Cmd.Stdout, c.Cmd.Stderr = c.Stdout, c.Stderr
	c.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if setup != nil {
		setup(c.Cmd)
	}
	// Once the child is gone, a stdin the test never closes must not hold Wait.
	c.Cmd.WaitDelay = time.Second
	if err := c.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		err := c.Cmd.Wait()
		c.code = c.Cmd.ProcessState.ExitCode()
		if ws, ok := c.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.code = 128 + int(ws.Signal())
		}
		if c.code == -1 && err != nil {
			c.code = 255
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		for _, pid := range c.Leftovers() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return c
}

// Wait returns the child's exit code (128+N for signal N), or kills it (and its group) and
// fails the test when ctx ends first. A child that ran out of its memory limit fails the
// test, whatever it exited with: the Go runtime exits 2 then, which is also our bad-input code.
func (c *Child) Wait(ctx context.Context, t testing.TB) int {
	t.Helper()
	select {
	case <-c.done:
	case <-ctx.Done():
		syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		t.Errorf("%s still running when the test's context ended (%v); stderr: %s", c.args(), ctx.Err(), c.Stderr)
	}
	if s := c.Stderr.String(); strings.Contains(s, "runtime: out of memory") || strings.Contains(s, "cannot allocate memory") {
		t.Errorf("%s grew past its %d MiB memory limit: %s", c.args(), ChildMemory>>20, lastLines(s, 5))
	}
	return c.code
}

// Signal sends sig to the child alone, as `kill` from a supervisor does: the processes it
// started must be stopped by the child itself.
func (c *Child) Signal(sig syscall.Signal) error { return c.Cmd.Process.Signal(sig) }

// Leftovers lists the processes still running that the child or anything it started
// started: they carry the child's environment marker. Processes that cleared their
// environment are not found.
func (c *Child) Leftovers() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == c.Cmd.Process.Pid && c.exited() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00"+c.marker+"\x00")) && !bytes.HasPrefix(env, []byte(c.marker+"\x00")) {
			continue
		}
		if !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (c *Child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Child) args() string { return strings.Join(c.Cmd.Args[3:], " ") }

// RunChild runs bin with args to its end under ctx and returns its exit code and output.
func RunChild(ctx context.Context, t testing.TB, bin string, args []string, setup func(*exec.Cmd)) (code int, stdout, stderr string) {
	t.Helper()
	c := StartChild(t, bin, args, setup)
	code = c.Wait(ctx, t)
	if left := c.Leftovers(); len(left) > 0 {
		t.Errorf("%s left processes running: %v", c.args(), left)
	}
	return code, c.Stdout.String(), c.Stderr.String()
}

// Output keeps what a child writes and lets a test wait for a string to appear in it: the
// event that shows the child reached a state, instead of a guess at how long it takes.
type Output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
	return len(p), nil
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// WaitFor blocks until the output holds s, or ctx ends.
func (o *Output) WaitFor(ctx context.Context, s string) error {
	for {
		o.mu.Lock()
		if strings.Contains(o.buf.String(), s) {
			o.mu.Unlock()
			return nil
		}
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q: %w; have %q", s, ctx.Err(), o.String())
		}
	}
}

// lastLines is the end of s, for a message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
