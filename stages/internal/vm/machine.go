package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Event is one thing that happened to a running VM, in order.
type Event struct {
	Time time.Time
	// Message is set for an agent message.
	Message *wire.Message
	// ProtocolErr is set for a line from the guest that is not a valid message.
	ProtocolErr error
	// Exited is set by the last event: qemu has stopped. ExitErr says how.
	Exited  bool
	ExitErr error
}

// Machine is a running qemu.
type Machine struct {
	cfg    Config
	accel  Accelerator
	cmd    *exec.Cmd
	events chan Event
	done   chan struct{} // closed when qemu has exited
	closed chan struct{} // closed when the events channel is closed and files removed
	exit   error
	tmp    string
	// owner holds tmp's lock (pipeline.OwnedTempDir) while the VM runs.
	owner *os.File
	ln    net.Listener
	log   *slog.Logger

	qmpPath string
	qmpMu   sync.Mutex
	// agentConn is qemu's current connection to the agent socket: Send writes to it.
	agentMu   sync.Mutex
	agentConn net.Conn
	stopOnce  sync.Once
	stderr    *pipeline.TailBuffer // qemu's stdout and stderr, for its exit error
}

// Start boots a VM with cfg and accelerator acc (see ResolveAccel). The VM is killed
// when ctx ends. Callers read Events until it is closed, or call Stop (always safe, and
// the right thing for a deferred cleanup).
func Start(ctx context.Context, cfg Config, acc Accelerator, log *slog.Logger) (*Machine, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("vm %s: %w", cfg.Name, err)
	}
	qemu, err := exec.LookPath(cfg.qemu())
	if err != nil {
		return nil, fmt.Errorf("vm %s: %s not found (install the Debian package qemu-system-x86): %w", cfg.Name, cfg.qemu(), err)
	}
	// A short private directory: unix socket paths are limited to 108 bytes. It is locked by
	// this process, so if it is killed (qemu dies with it) the next VM's start removes it.
	tmp, owner, err := pipeline.OwnedTempDir("sfvm-", log)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", cfg.Name, err)
	}
	m := &Machine{cfg: cfg, accel: acc, events: make(chan Event, 256), done: make(chan struct{}), closed: make(chan struct{}), tmp: tmp, owner: owner, log: log, stderr: pipeline.NewTailBuffer(4096)}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			owner.Close()
		}
	}()
	rp := runtimePaths{AgentSocket: filepath.Join(tmp, "agent.sock"), QMPSocket: filepath.Join(tmp, "qmp.sock")}
	m.qmpPath = rp.QMPSocket
	if cfg.Firmware == FirmwareUEFI {
		code, vars, err := cfg.ovmf()
		if err != nil {
			return nil, fmt.Errorf("vm %s: %w", cfg.Name, err)
		}
		rp.OVMFCode, rp.OVMFVars = code, filepath.Join(tmp, "OVMF_VARS.fd")
		if err := copyFile(vars, rp.OVMFVars); err != nil {
			return nil, fmt.Errorf("vm %s: UEFI variable store: %w", cfg.Name, err)
		}
	}
	// The host listens and qemu connects, so the socket is ready before the guest can
	// write and no message is lost to a connection race.
	m.ln, err = net.Listen("unix", rp.AgentSocket)
	if err != nil {
		return nil, fmt.Errorf("vm %s: agent socket: %w", cfg.Name, err)
	}
	args := cfg.args(acc, rp)
	m.cmd = exec.Command(qemu, args...)
	m.cmd.Stdout = m.stderr
	m.cmd.Stderr = m.stderr
	// Own process group so Stop kills everything qemu started; Pdeathsig so qemu cannot
	// outlive us even if we are killed without running cleanups.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	log.Info("starting VM", "name", cfg.Name, "accel", acc.Name, "console", cfg.ConsoleLog)
	log.Debug("qemu command", "args", args)
	started, exited := m.startQemu()
	if err := <-started; err != nil {
		m.ln.Close()
		return nil, fmt.Errorf("vm %s: starting qemu: %w", cfg.Name, err)
	}
	ok = true
	m.watch(ctx, exited)
	return m, nil
}

// watch reads the agent socket, ends the event stream when qemu exits (exited delivers
// how) and kills qemu when ctx ends.
func (m *Machine) watch(ctx context.Context, exited <-chan error) {
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		m.readAgent()
	}()
	go func() {
		err := <-exited
		if tail := lastLines(m.stderr.String(), stderrLines); err != nil && tail != "" {
			err = fmt.Errorf("%w: %s", err, tail)
		}
		m.exit = err
		close(m.done)
		m.ln.Close()
		readers.Wait()
		m.events <- Event{Time: time.Now(), Exited: true, ExitErr: err}
		close(m.events)
		os.RemoveAll(m.tmp)
		m.owner.Close() // after the removal, so no other process reaps the directory first
		close(m.closed)
	}()
	go func() {
		select {
		case <-ctx.Done():
			m.kill() // events stay readable: the caller may want the Exited event
		case <-m.done:
		}
	}()
}

// startQemu starts qemu and waits for it on one locked OS thread that lives as long as
// qemu: the kernel sends the parent-death signal when the starting thread ends, not the
// process, and Go ends the thread of a goroutine that returns while locked. started gets
// Start's error; exited then gets Wait's.
func (m *Machine) startQemu() (started, exited <-chan error) {
	s, e := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := m.cmd.Start(); err != nil {
			s <- err
			return
		}
		s <- nil
		e <- m.cmd.Wait()
	}()
	return s, e
}

// readAgent accepts qemu's connection(s) to the agent socket and decodes messages. A
// guest reboot keeps the connection; a reconnect (qemu restarted the chardev) is served
// with a fresh decoder in order.
func (m *Machine) readAgent() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			return // listener closed: qemu exited
		}
		// Unblock the read when qemu exits: its end of the socket closes then anyway,
		// but do not rely on it.
		go func() {
			<-m.done
			conn.Close()
		}()
		m.agentMu.Lock()
		m.agentConn = conn
		m.agentMu.Unlock()
		d := wire.NewDecoder(conn)
		for {
			msg, err := d.Next()
			if err != nil {
				var pe *wire.ProtocolError
				if errors.As(err, &pe) {
					m.events <- Event{Time: time.Now(), ProtocolErr: err}
					continue
				}
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					m.log.Debug("agent socket read ended", "err", err)
				}
				break
			}
			m.events <- Event{Time: time.Now(), Message: &msg}
		}
		conn.Close()
	}
}

// Events returns the VM's events in order; it is closed after the Exited event.
func (m *Machine) Events() <-chan Event { return m.events }

// Accelerator returns the accelerator the VM runs with.
func (m *Machine) Accelerator() Accelerator { return m.accel }

// Done is closed when qemu has exited.
func (m *Machine) Done() <-chan struct{} { return m.done }

// Stop kills qemu's process group and waits until it and the goroutines reading it are
// gone. Events not yet read are discarded. It is safe to call more than once and after
// qemu has exited.
func (m *Machine) Stop() {
	m.stopOnce.Do(func() {
		m.kill()
		// Drain, so the readers blocked on a full channel can finish.
		go func() {
			for range m.events {
			}
		}()
	})
	<-m.closed
}

// kill sends SIGKILL to qemu's process group unless it has already exited.
func (m *Machine) kill() {
	select {
	case <-m.done:
	default:
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Reset hard-resets the VM (the reset button): the guest reboots without shutting down.
// With NoReboot set, qemu exits instead.
func (m *Machine) Reset(ctx context.Context) error {
	_, err := m.machineCommand(ctx, "system_reset")
	return err
}

// Powerdown presses the ACPI power button; the guest decides what to do with it.
func (m *Machine) Powerdown(ctx context.Context) error {
	_, err := m.machineCommand(ctx, "system_powerdown")
	return err
}

// Status is QMP's query-status reply (e.g. {"running":true,"status":"running"}), for a
// gather bundle.
func (m *Machine) Status(ctx context.Context) (json.RawMessage, error) {
	return m.machineCommand(ctx, "query-status")
}

// Send writes c to the guest's agent port. Write only to a guest that asked
// (wire.PhaseAwaiting): a port drops what it is sent while no reader holds it open.
func (m *Machine) Send(c wire.Command) error {
	m.agentMu.Lock()
	defer m.agentMu.Unlock()
	if m.agentConn == nil {
		return fmt.Errorf("vm %s: sending %s: the agent port is not connected", m.cfg.Name, c.Name)
	}
	if err := wire.EncodeCommand(m.agentConn, c); err != nil {
		return fmt.Errorf("vm %s: sending %s: %w", m.cfg.Name, c.Name, err)
	}
	return nil
}

// Snapshot moves the VM's target disk (Config.Disks[0]) onto overlay, an existing qcow2
// whose backing file is that disk (CreateOverlay): from then on the guest writes the
// overlay and the disk stays as it was, while the guest runs on. Freeze the guest's
// filesystems first for a clean disk.
func (m *Machine) Snapshot(ctx context.Context, overlay string) error {
	_, err := m.machineCommand(ctx, "blockdev-snapshot-sync", map[string]any{
		"device": "disk0", "snapshot-file": overlay, "format": "qcow2", "mode": "existing"})
	return err
}

func (m *Machine) machineCommand(ctx context.Context, cmd string, args ...map[string]any) (json.RawMessage, error) {
	m.qmpMu.Lock()
	defer m.qmpMu.Unlock()
	select {
	case <-m.done:
		return nil, fmt.Errorf("vm %s: %s: %w", m.cfg.Name, cmd, ErrExited)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q, err := dialQMP(ctx, m.qmpPath)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %s: %w", m.cfg.Name, cmd, err)
	}
	defer q.close()
	ret, err := q.execute(cmd, args...)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", m.cfg.Name, err)
	}
	return ret, nil
}

// ExitErr is how qemu exited; valid after Done is closed.
func (m *Machine) ExitErr() error {
	<-m.done
	return m.exit
}

// ErrExited means the VM stopped before the awaited signal.
var ErrExited = errors.New("VM exited before signalling completion")

// WaitFinal reads events until the guest sends the final message for phase (one of
// wire.PhaseInstallComplete, wire.PhaseBootComplete) and returns every message seen,
// in order. It fails if that final message reports failure, if qemu exits first, or if
// ctx ends. onMessage, if not nil, sees each message as it arrives.
func (m *Machine) WaitFinal(ctx context.Context, phase string, onMessage func(wire.Message)) ([]wire.Message, error) {
	var msgs []wire.Message
	for {
		select {
		case <-ctx.Done():
			return msgs, fmt.Errorf("vm %s: waiting for %s: %w (console: %s)", m.cfg.Name, phase, ctx.Err(), m.cfg.ConsoleLog)
		case ev, ok := <-m.events:
			if !ok {
				return msgs, fmt.Errorf("vm %s: waiting for %s: %w", m.cfg.Name, phase, ErrExited)
			}
			switch {
			case ev.Exited:
				return msgs, fmt.Errorf("vm %s: waiting for %s: %w (qemu: %v; console: %s)", m.cfg.Name, phase, ErrExited, ev.ExitErr, m.cfg.ConsoleLog)
			case ev.ProtocolErr != nil:
				m.log.Warn("bad message from guest agent", "vm", m.cfg.Name, "err", ev.ProtocolErr)
			case ev.Message != nil:
				msg := *ev.Message
				msgs = append(msgs, msg)
				m.log.Info("guest phase", "vm", m.cfg.Name, "phase", msg.Phase, "status", msg.Status, "seq", msg.Seq, "uptime", msg.Uptime)
				if onMessage != nil {
					onMessage(msg)
				}
				if msg.Final() && msg.Phase == phase {
					if msg.Status == wire.StatusFailed {
						return msgs, fmt.Errorf("vm %s: guest reported %s failed: %s", m.cfg.Name, phase, msg.Details["error"])
					}
					return msgs, nil
				}
				if msg.Final() && msg.Status == wire.StatusFailed {
					return msgs, fmt.Errorf("vm %s: guest reported %s failed while waiting for %s: %s", m.cfg.Name, msg.Phase, phase, msg.Details["error"])
				}
			}
		}
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// CreateDisk creates an empty disk image of sizeMiB with qemu-img (format qcow2 or raw),
// mode 0600: a factory disk holds the build's pull secret until the seal removes it.
func CreateDisk(ctx context.Context, path, format string, sizeMiB int) error {
	if format == "" {
		format = "qcow2"
	}
	img, err := exec.LookPath("qemu-img")
	if err != nil {
		return fmt.Errorf("create disk %s: qemu-img not found (install the Debian package qemu-utils): %w", path, err)
	}
	out, err := exec.CommandContext(ctx, img, "create", "-q", "-f", format, path, fmt.Sprintf("%dM", sizeMiB)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create disk %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return os.Chmod(path, 0o600)
}

// CreateOverlay creates a qcow2 image at overlay backed by base (of baseFormat), so a VM
// writes to the overlay and base stays as it was. It is mode 0600: what a VM writes there
// (a pull secret, a site's credentials) is nobody else's to read.
func CreateOverlay(ctx context.Context, base, baseFormat, overlay string) error {
	abs, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-b", abs, "-F", baseFormat, overlay).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create overlay of %s: %w: %s", base, err, bytes.TrimSpace(out))
	}
	return os.Chmod(overlay, 0o600)
}

// StartManaged starts a VM like Start and registers its Stop with cl at once, so a stage's
// VM is stopped when the stage ends, whatever the outcome.
func StartManaged(ctx context.Context, cfg Config, acc Accelerator, log *slog.Logger, cl pipeline.Cleaner) (*Machine, error) {
	m, err := Start(ctx, cfg, acc, log)
	if err != nil {
		return nil, err
	}
	cl.Cleanup("VM "+cfg.Name, func(context.Context) error {
		m.Stop()
		return nil
	})
	return m, nil
}
