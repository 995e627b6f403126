package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// The factory's commands: a node the factory keeps running from its install through
// validation to its seal (one boot per build) takes what to do next from the host. The
// guest asks: it opens the agent port, sends PhaseAwaiting and reads one Command line on
// the same open port. Asking first matters: a virtio-serial port drops what the host sent
// while no reader held it open, so the host writes only to a guest that is reading.

// PhaseAwaiting says the guest reads one Command now. Its details say how the previous
// command went (DetailLast, and DetailError when it failed).
const PhaseAwaiting = "awaiting-command"

// Details of PhaseAwaiting, and DetailCommands of the final message of a boot.
const (
	// DetailLast is "COMMAND:ok" or "COMMAND:failed" for the previous command.
	DetailLast = "last"
	// DetailCommands is "1" on install-complete or boot-complete when the node stays up
	// and asks for commands next, instead of powering off or idling.
	DetailCommands = "commands"
)

// Commands.
const (
	// CommandFreeze flushes and freezes the node's root filesystem, so the host can take
	// the disk as it stands (a clean filesystem) while the node keeps running.
	CommandFreeze = "freeze"
	// CommandThaw ends a freeze.
	CommandThaw = "thaw"
	// CommandReport reports the node as a later boot does (its facts, then boot-complete).
	CommandReport = "report"
	// CommandSeal seals the node with Command.Seal, as the seal disk would ask: the node
	// reports PhaseSealed and powers off.
	CommandSeal = "seal"
	// CommandPoweroff shuts the node down cleanly.
	CommandPoweroff = "poweroff"
)

// CommandVersion is the Command format.
const CommandVersion = 1

// Command is one thing the host asks of a running node.
type Command struct {
	Version int    `json:"version"`
	Name    string `json:"command"`
	// Seal is CommandSeal's request.
	Seal *SealRequest `json:"seal,omitempty"`
}

// Validate refuses a command this agent does not know.
func (c Command) Validate() error {
	if c.Version != CommandVersion {
		return fmt.Errorf("command version %d, want %d", c.Version, CommandVersion)
	}
	switch c.Name {
	case CommandFreeze, CommandThaw, CommandReport, CommandPoweroff:
		if c.Seal != nil {
			return fmt.Errorf("command %s carries a seal request", c.Name)
		}
		return nil
	case CommandSeal:
		if c.Seal == nil {
			return errors.New("command seal carries no seal request")
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", c.Name)
}

// EncodeCommand writes c as one line.
func EncodeCommand(w io.Writer, c Command) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadCommand reads one command line (at most MaxLineBytes) and checks it.
func ReadCommand(r io.Reader) (Command, error) {
	var c Command
	line, err := bufio.NewReaderSize(io.LimitReader(r, MaxLineBytes+1), 4096).ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && line == "" {
			return c, fmt.Errorf("reading a command: the host closed the port: %w", err)
		}
		if !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("reading a command: %w", err)
		}
		if len(line) > MaxLineBytes {
			return c, fmt.Errorf("reading a command: line longer than %d bytes", MaxLineBytes)
		}
		return c, errors.New("reading a command: the line has no end")
	}
	if err := strictjson.Decode([]byte(line), &c); err != nil {
		return c, fmt.Errorf("reading a command: %w", err)
	}
	return c, c.Validate()
}
