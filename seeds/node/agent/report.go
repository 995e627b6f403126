package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/flock"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Reporter sends messages from the guest. Each `snofactory agent report` is its own
// process, so the sequence counter lives in a small state file guarded by flock.
type Reporter struct {
	// Port is the device to write to: a path such as /dev/virtio-ports/NAME, or a bare
	// port name. See ResolvePort.
	Port string
	// StateDir holds the sequence counter; it must not survive a reboot (a tmpfs).
	StateDir string
	// SysRoot is prepended to /sys and /proc paths; empty on a real node.
	SysRoot string
	// Clock stamps the messages; nil means the wall clock.
	Clock clock.Clock
}

// DefaultStateDir is where the guest keeps the sequence counter.
const DefaultStateDir = "/run/snofactory-agent"

// Report sends one message with the next sequence number and returns it.
func (r Reporter) Report(ctx context.Context, phase string, status wire.Status, details map[string]string) (wire.Message, error) {
	m, err := r.send(ctx, phase, status, details, os.O_WRONLY|os.O_APPEND, nil) // append: harmless on a device, right for a log file
	return m, err
}

// send writes one message to the port opened with flag; with then, then reads from the
// port while it is still open (the port drops what the host sends to no open reader).
func (r Reporter) send(ctx context.Context, phase string, status wire.Status, details map[string]string, flag int, then func(*os.File) error) (wire.Message, error) {
	now := clock.Or(r.Clock).Now
	boot, err := r.bootID()
	if err != nil {
		return wire.Message{}, err
	}
	m := wire.Message{Version: wire.ProtocolVersion, Boot: boot, Time: now().UTC(), Uptime: r.uptime(), Phase: phase, Status: status, Details: details}
	// Check before taking a sequence number so a typo does not leave a gap.
	m.Seq = 1
	if err := m.Validate(); err != nil {
		return wire.Message{}, fmt.Errorf("report phase %q: %w", phase, err)
	}
	port, err := ResolvePort(r.Port, r.SysRoot)
	if err != nil {
		return wire.Message{}, err
	}
	stateDir := r.StateDir
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	// The counter stays locked until the line is written, so two concurrent reporters
	// cannot interleave their sequence numbers on the port.
	unlock, seq, err := nextSeq(stateDir)
	if err != nil {
		return wire.Message{}, err
	}
	m.Seq = seq
	f, err := os.OpenFile(port, flag, 0)
	if err != nil {
		unlock()
		return wire.Message{}, fmt.Errorf("open agent port: %w", err)
	}
	defer f.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = f.SetWriteDeadline(dl) // not every device supports deadlines; best effort
	}
	err = wire.Encode(f, m)
	unlock()
	if err != nil {
		return wire.Message{}, fmt.Errorf("report to %s: %w", port, err)
	}
	if then != nil {
		if err := then(f); err != nil {
			return m, err
		}
	}
	if err := f.Close(); err != nil {
		return wire.Message{}, fmt.Errorf("close agent port %s: %w", port, err)
	}
	return m, nil
}

// Await tells the host the node takes a command (PhaseAwaiting, with details on the
// previous one) and returns the command the host answers with, read on the same open port.
func (r Reporter) Await(ctx context.Context, details map[string]string) (wire.Command, error) {
	var c wire.Command
	_, err := r.send(ctx, wire.PhaseAwaiting, wire.StatusOK, details, os.O_RDWR, func(f *os.File) error {
		var rerr error
		c, rerr = wire.ReadCommand(f)
		return rerr
	})
	return c, err
}

func (r Reporter) bootID() (string, error) {
	b, err := os.ReadFile(filepath.Join(r.SysRoot, "/proc/sys/kernel/random/boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (r Reporter) uptime() float64 {
	b, err := os.ReadFile(filepath.Join(r.SysRoot, "/proc/uptime"))
	if err != nil {
		return 0 // optional: only informative
	}
	f, _, _ := strings.Cut(string(b), " ")
	u, _ := strconv.ParseFloat(f, 64)
	return u
}

func nextSeq(dir string) (unlock func(), seq uint64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("agent state dir: %w", err)
	}
	path := filepath.Join(dir, "seq")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("agent sequence file: %w", err)
	}
	if err := flock.Lock(f); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("lock %s: %w", path, err)
	}
	unlock = func() { f.Close() } // closing drops the lock
	b := make([]byte, 32)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		unlock()
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	last, _ := strconv.ParseUint(strings.TrimSpace(string(b[:n])), 10, 64)
	seq = last + 1
	if err := f.Truncate(0); err != nil {
		unlock()
		return nil, 0, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteAt([]byte(strconv.FormatUint(seq, 10)+"\n"), 0); err != nil {
		unlock()
		return nil, 0, fmt.Errorf("write %s: %w", path, err)
	}
	return unlock, seq, nil
}

// ResolvePort turns a port path or name into a device path. A path that exists is used
// as is. /dev/virtio-ports/NAME symlinks are made by udev, which a minimal initramfs does
// not run, so a missing one (or a bare NAME) is looked up in /sys/class/virtio-ports.
func ResolvePort(port, sysRoot string) (string, error) {
	if port == "" {
		port = "/dev/virtio-ports/" + wire.DefaultPortName
	}
	if strings.Contains(port, "/") {
		if _, err := os.Stat(port); err == nil {
			return port, nil
		}
	}
	name := filepath.Base(port)
	dirs, err := filepath.Glob(filepath.Join(sysRoot, "/sys/class/virtio-ports/*/name"))
	if err != nil {
		return "", fmt.Errorf("find virtio port %s: %w", name, err)
	}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		dev := filepath.Join("/dev", filepath.Base(filepath.Dir(p)))
		return dev, nil
	}
	return "", fmt.Errorf("virtio port %s not found (is the virtio_console module loaded and the port attached?)", name)
}

// MaxDetailFile caps a file a report describes (a --detail-file, a file an Ignition config
// wrote): it is hashed whole, so a huge file would hold the report for minutes. Files a
// report describes are configuration, far below it.
const MaxDetailFile = 64 << 20

// logTailSlack is how much more than a tail's byte cap TailLines reads from a log's end,
// for the newlines it trims off the end first.
const logTailSlack = 4 << 10

// FileDetails describes the file at path for a report: key.sha256 and key.size always,
// and key itself (the content) when it is short UTF-8 text. The file must be a regular
// file (after symlinks) of at most MaxDetailFile bytes: a FIFO or a device is refused
// before it is read, so it neither blocks the report nor feeds it without end.
func FileDetails(key, path string) (map[string]string, error) {
	return fileDetails(key, path, true)
}

// fileDetails is FileDetails, sending the content only if withContent. It streams the
// file through the hash, keeping only the bytes the content detail may carry.
func fileDetails(key, path string, withContent bool) (map[string]string, error) {
	f, err := smallfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("detail %s: %w", key, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > MaxDetailFile {
		return nil, fmt.Errorf("detail %s: %w", key, smallfile.TooLarge(path, MaxDetailFile))
	}
	h := sha256.New()
	head := headWriter{max: wire.MaxDetailFileBytes + 1}
	n, err := io.Copy(io.MultiWriter(h, &head), io.LimitReader(f, MaxDetailFile+1))
	if err != nil {
		return nil, fmt.Errorf("detail %s: read %s: %w", key, path, err)
	}
	if n > MaxDetailFile {
		return nil, fmt.Errorf("detail %s: %w", key, smallfile.TooLarge(path, MaxDetailFile))
	}
	d := map[string]string{
		key + ".sha256": hex.EncodeToString(h.Sum(nil)),
		key + ".size":   strconv.FormatInt(n, 10),
	}
	if b := head.buf; withContent && len(b) <= wire.MaxDetailFileBytes && utf8.Valid(b) {
		d[key] = string(b)
	}
	return d, nil
}

// headWriter keeps the first max bytes written to it and drops the rest.
type headWriter struct {
	buf []byte
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// TailLines returns at most the last n lines of the file at p, and at most max bytes
// of them (the end), for a failure report's DetailLog. Only the log's end is read (max
// bytes and a little more), so a log of any size costs the same; it must be a regular
// file, so a FIFO cannot block the report.
func TailLines(p string, n, max int) (string, error) {
	f, err := smallfile.Open(p)
	if err != nil {
		return "", fmt.Errorf("log tail: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("log tail: %w", err)
	}
	window := int64(max) + logTailSlack
	b, err := io.ReadAll(io.NewSectionReader(f, fi.Size()-min(window, fi.Size()), window))
	if err != nil {
		return "", fmt.Errorf("log tail: read %s: %w", p, err)
	}
	b = bytes.TrimRight(b, "\n")
	for i, cut := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if cut++; cut == n {
				b = b[i+1:]
				break
			}
		}
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b), nil
}
