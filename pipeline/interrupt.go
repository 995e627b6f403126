package pipeline

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ToolGrace is how long a tool RunTool started has, after SIGTERM, to stop before its
// process group is killed: the SIGTERM-then-SIGKILL of podman stop (containers/podman
// docs/source/markdown/podman-stop.1.md: 10 s by default), shorter because no tool we run
// holds state it must save. A second Ctrl-C does not wait for it (Interruptible).
const ToolGrace = 5 * time.Second

// toolGroups are the process groups of the tools running under one command, so that a
// second Ctrl-C can kill them all at once.
type toolGroups struct {
	mu     sync.Mutex
	pgids  map[int]struct{}
	killed bool
}

type toolGroupsKey struct{}

// add records the group of a tool that just started; under a command already killed, the
// tool is killed at once.
func (g *toolGroups) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.killed {
		syscall.Kill(-pgid, syscall.SIGKILL)
		return
	}
	g.pgids[pgid] = struct{}{}
}

func (g *toolGroups) remove(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pgids, pgid)
}

// killAll kills every tool group with SIGKILL, and any started later.
func (g *toolGroups) killAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.killed = true
	for pgid := range g.pgids {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// Interruptible returns a context that the first SIGINT or SIGTERM cancels (its cause
// names the signal), so the command stops cleanly: each tool gets SIGTERM and ToolGrace.
// A second signal kills every tool group RunTool started under the context with SIGKILL,
// at once, then calls second, which ends the process (exit 130, as a shell reports an
// interrupted command). stop releases the signals.
func Interruptible(parent context.Context, second func()) (ctx context.Context, stop func()) {
	g := &toolGroups{pgids: map[int]struct{}{}}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, toolGroupsKey{}, g))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case s := <-sigs:
				if n == 0 {
					cancel(errors.New(s.String() + " signal received"))
					continue
				}
				g.killAll()
				second()
				return
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
}

// trackTool records the group of a tool started under ctx (see Interruptible) until the
// returned function is called.
func trackTool(ctx context.Context, pgid int) (untrack func()) {
	g, _ := ctx.Value(toolGroupsKey{}).(*toolGroups)
	if g == nil {
		return func() {}
	}
	g.add(pgid)
	return func() { g.remove(pgid) }
}
