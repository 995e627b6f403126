package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ToolError is a failed external tool: which one, its exit status and the tail of its stderr.
// The stage's full log (see StageError) holds everything it printed.
type ToolError struct {
	Tool       string
	Args       []string
	ExitCode   int
	StderrTail string
	Err        error
}

func (e *ToolError) Error() string {
	msg := fmt.Sprintf("%s failed: %v", e.Tool, e.Err)
	if e.StderrTail != "" {
		msg += "\n--- last lines of " + e.Tool + "'s stderr ---\n" + e.StderrTail
	}
	return msg
}

func (e *ToolError) Unwrap() error { return e.Err }

// Exec runs an external tool for the stage: its output goes to the stage log, it runs in its
// own process group so cancellation stops it and everything it started, and a failure comes
// back as a *ToolError with its stderr tail.
func (e *Env) Exec(ctx context.Context, cmd *exec.Cmd) error {
	w := NewLineLogger(e.Log, toolName(cmd))
	defer w.Flush()
	return RunTool(ctx, cmd, w)
}

// RunTool runs cmd in its own process group. When ctx ends the group gets SIGTERM, then
// SIGKILL after ToolGrace, or at once on a second Ctrl-C (Interruptible). Output is copied
// to w (if not nil) and stderr's last lines are kept for the error.
func RunTool(ctx context.Context, cmd *exec.Cmd, w io.Writer) error {
	tail := NewTailBuffer(4096)
	var out io.Writer = tail
	if w != nil {
		out = io.MultiWriter(w, tail)
	}
	if cmd.Stdout == nil {
		if w != nil {
			cmd.Stdout = w
		}
	}
	if cmd.Stderr == nil {
		cmd.Stderr = out
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if cmd.WaitDelay == 0 {
		// A process the tool left behind outside its group (a daemon it spawned) may hold
		// its output pipe open forever: once the tool is gone, stop copying after a moment.
		cmd.WaitDelay = time.Second
	}
	if err := cmd.Start(); err != nil {
		return &ToolError{Tool: toolName(cmd), Args: cmd.Args, ExitCode: -1, Err: err}
	}
	defer trackTool(ctx, cmd.Process.Pid)()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(ToolGrace):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s stopped: %w", toolName(cmd), ctx.Err())
	}
	te := &ToolError{Tool: toolName(cmd), Args: cmd.Args, ExitCode: -1, StderrTail: tail.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		te.ExitCode = ee.ExitCode()
	}
	return te
}

func toolName(cmd *exec.Cmd) string {
	if len(cmd.Args) > 0 {
		return cmd.Args[0]
	}
	return cmd.Path
}

// TailBuffer is an io.Writer that keeps the last max bytes written, trimmed to whole
// lines: the end of a tool's stderr, for its error. Safe for concurrent use.
type TailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTailBuffer returns a TailBuffer keeping about the last max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String returns the kept tail without its final newline.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
