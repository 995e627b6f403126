package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

// toolChildEnv makes the test binary toolChild: a command under Interruptible running one
// tool that ignores SIGTERM.
const toolChildEnv = "PIPELINE_TEST_TOOL_CHILD"

// stubbornTool is a tool that traps SIGTERM (it says so on stdout, and carries on) with a
// process in its group that ignores SIGTERM: a tool that would hold Ctrl-C for the whole
// grace. It prints its group and its sleeper's pid once both run.
const stubbornTool = `trap 'echo "tool got TERM"' TERM
(trap '' TERM; exec sleep 600) &
echo "tool $$ $!"
while :; do wait; done`

// toolChild is the command the test interrupts: it runs stubbornTool under Interruptible
// as main does, and exits 130 on the second signal.
func toolChild() int {
	ctx, stop := Interruptible(context.Background(), func() { os.Exit(130) })
	defer stop()
	err := RunTool(ctx, exec.Command("sh", "-c", stubbornTool), os.Stdout)
	fmt.Fprintln(os.Stderr, "RunTool returned:", err)
	return 3
}

// A second Ctrl-C does not wait out the grace a tool gets after SIGTERM: the first Ctrl-C
// reaches the tool as SIGTERM, which it ignores; the second kills the tool's whole group at
// once and the command exits 130, leaving no process behind, the one that ignores SIGTERM
// included (before, the command died of the second SIGINT and that process ran on). The
// waits are on events (the tool's lines, the child's exit, each process's pidfd), bounded
// only by the test's context.
func TestSecondInterruptKillsToolsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out := make(chan string, 4)
	c := testbin.StartChild(t, os.Args[0], []string{"-test.run=^$"}, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, toolChildEnv+"=1")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = w
		t.Cleanup(func() { r.Close() })
		go func() {
			s := bufio.NewScanner(r)
			for s.Scan() {
				out <- s.Text()
			}
			close(out)
		}()
		t.Cleanup(func() { w.Close() })
	})
	next := func(prefix string) string {
		t.Helper()
		select {
		case line, ok := <-out:
			if !ok || !strings.HasPrefix(line, prefix) {
				t.Fatalf("the child said %q (open %v), want %q; stderr: %s", line, ok, prefix, c.Stderr)
			}
			return line
		case <-ctx.Done():
			t.Fatalf("no %q from the child: %v; stderr: %s", prefix, ctx.Err(), c.Stderr)
		}
		return ""
	}
	var pgid, sleeper int
	if _, err := fmt.Sscanf(next("tool "), "tool %d %d", &pgid, &sleeper); err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	next("tool got TERM") // the first Ctrl-C reached the tool, which carries on
	if err := c.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := c.Wait(ctx, t); code != 130 {
		t.Fatalf("exit %d after the second Ctrl-C, want 130; stderr: %s", code, c.Stderr)
	}
	for _, pid := range []int{pgid, sleeper} {
		if deadline, ok := ctx.Deadline(); ok {
			if err := testbin.WaitExitedWithin(pid, time.Until(deadline)); err != nil {
				t.Errorf("the tool's process %d: %v", pid, err)
			}
		}
	}
	if left := c.Leftovers(); len(left) != 0 {
		t.Errorf("%d processes left behind: %v", len(left), left)
	}
}
