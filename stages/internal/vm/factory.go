package vm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// SessionKind is the pipeline session kind of the factory VM (pipeline.Stage.Session).
const SessionKind = "factory-vm"

// Factory is the factory VM a build keeps up from install through validate to seal: the
// Value of their pipeline.Session. The guest takes commands (wire.Command) between
// stages; the stage holding the session drives it.
type Factory struct {
	Machine *Machine
	// Accel is what the VM runs on (timeouts scale with it).
	Accel Accelerator
	// Disk is the qcow2 the guest writes now, in the session's directory: an overlay
	// whose backing file is the installed disk.
	Disk string
	// Console is the VM's console log (the stage that started it named it).
	Console string
	// APIServer is the node's API forwarded to the host ("https://127.0.0.1:PORT"), when
	// it has one.
	APIServer string
	// asked: the guest has sent wire.PhaseAwaiting and waits for a command.
	asked bool
}

// TakesCommands tells whether a final message (install-complete, boot-complete) says the
// node stays up and takes commands afterwards.
func TakesCommands(msgs []wire.Message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Final() {
			return msgs[i].Details[wire.DetailCommands] == "1"
		}
	}
	return false
}

// askTimeout bounds the wait for a guest to ask for its next command after the previous
// one, at KVM speed: asking is the next thing it does.
const askTimeout = 2 * time.Minute

// Ask waits until the guest asks for a command, unless it already has, and checks that
// its previous command went well.
func (f *Factory) Ask(ctx context.Context) error {
	if f.asked {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, f.Accel.Scale(askTimeout))
	defer cancel()
	msgs, err := f.Machine.WaitFinal(wctx, wire.PhaseAwaiting, nil)
	if err != nil {
		return fmt.Errorf("the factory VM did not ask for its next command: %w", err)
	}
	last := msgs[len(msgs)-1].Details
	if _, status, _ := strings.Cut(last[wire.DetailLast], ":"); status == "failed" {
		return fmt.Errorf("the factory VM's %s failed: %s (console: %s)", strings.SplitN(last[wire.DetailLast], ":", 2)[0], last[wire.DetailError], f.Console)
	}
	f.asked = true
	return nil
}

// Do sends c once the guest asks for it. For a command the guest answers by asking for
// the next one (freeze, thaw), wait with Ask; for the others, with the phase they report.
func (f *Factory) Do(ctx context.Context, c wire.Command) error {
	if c.Version == 0 {
		c.Version = wire.CommandVersion
	}
	if err := f.Ask(ctx); err != nil {
		return err
	}
	f.asked = false
	return f.Machine.Send(c)
}

// Stop ends the VM: what it wrote since the installed disk is in the session's overlay,
// which goes with the session.
func (f *Factory) Stop(context.Context) error {
	f.Machine.Stop()
	return nil
}
