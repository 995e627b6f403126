package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// consoleTailLines is how much of the console a timeout shows.
const consoleTailLines = 25

// follower reads a running install's events against its plan and phase timeouts.
type follower struct {
	opts    Options
	env     *pipeline.Env
	m       *vm.Machine
	acc     vm.Accelerator
	console string
	tracker *tracker
	// messages is every agent message, for the gather bundle.
	messages []wire.Message
}

// timeout is the scaled time the phase may take.
func (f *follower) timeout(phase string) time.Duration {
	d, ok := f.opts.Timeouts[phase]
	if !ok {
		d = f.opts.DefaultTimeout
	}
	if d <= 0 {
		d = 10 * time.Minute
	}
	return f.acc.Scale(d)
}

// follow returns when the guest reports the last planned phase, or with why not.
func (f *follower) follow(ctx context.Context) error {
	start := time.Now()
	phase := f.tracker.expecting()
	timer := time.NewTimer(f.timeout(phase))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("phase %s did not report within %s (last phase seen: %s)\n--- console tail (%s) ---\n%s",
				phase, f.timeout(phase), f.tracker.lastSeen(), f.console, consoleTail(f.console, consoleTailLines))
		case ev, ok := <-f.m.Events():
			if !ok || ev.Exited {
				return fmt.Errorf("the VM stopped while waiting for phase %s (last phase seen: %s; qemu: %v)\n--- console tail (%s) ---\n%s",
					phase, f.tracker.lastSeen(), ev.ExitErr, f.console, consoleTail(f.console, consoleTailLines))
			}
			if ev.ProtocolErr != nil {
				f.env.Log.Warn("bad message from the guest agent", "error", ev.ProtocolErr.Error())
				continue
			}
			m := *ev.Message
			f.messages = append(f.messages, m)
			f.env.Log.Info("guest", "phase", m.Phase, "status", m.Status, "uptime", m.Uptime)
			finished, err := f.tracker.observe(m, time.Since(start))
			if err != nil || finished {
				if finished && err == nil {
					f.logCompletion(m)
				}
				return err
			}
			if next := f.tracker.expecting(); next != phase {
				phase = next
				f.env.Progress("phase "+phase, int64(f.tracker.next), int64(len(f.tracker.plan)), "phases")
				timer.Reset(f.timeout(phase))
			}
		}
	}
}

// logCompletion keeps what the installed node reported of its first boot (its identity,
// its services, the facts validate checks) in the stage's log, which a successful build
// keeps; the agent messages are otherwise kept only in a failure's gather bundle. The log's
// redactor sees every value.
func (f *follower) logCompletion(m wire.Message) {
	attrs := make([]any, 0, len(m.Details))
	for _, k := range slices.Sorted(maps.Keys(m.Details)) {
		attrs = append(attrs, slog.String(k, m.Details[k]))
	}
	f.env.Log.Info("the installed node reported", "phase", m.Phase, slog.Group("details", attrs...))
}

// fail writes the gather bundle for err and returns err naming where it is.
func (f *follower) fail(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	dir, gerr := f.gather(err)
	if gerr != nil {
		f.env.Log.Warn("could not write the gather bundle", "error", gerr.Error())
		return err
	}
	return fmt.Errorf("%w\ngather bundle: %s", err, dir)
}

// consoleTail is the last n lines of the console log.
func consoleTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(console unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(b), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// encodeMessages is the agent messages as JSON lines, as the guest sent them.
func encodeMessages(msgs []wire.Message) []byte {
	var b strings.Builder
	for _, m := range msgs {
		line, _ := json.Marshal(m)
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
