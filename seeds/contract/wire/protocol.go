package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// ProtocolVersion is carried in every message so the host can refuse a guest it does not
// understand instead of misreading it.
const ProtocolVersion = 1

// DefaultPortName is the virtio-serial port name the host creates and the agent writes to.
const DefaultPortName = "org.snofactory.agent.0"

// GatherPortName is the virtio-serial port a failing guest writes its log bundle to (a
// gzipped tar, such as the one OpenShift's installer-gather.sh makes), before it reports
// the failure: the host keeps the bytes in the install's gather bundle. It is a port of
// its own because a bundle is megabytes, and a message line is bounded (MaxLineBytes).
const GatherPortName = "org.snofactory.gather.0"

// Status says where a phase stands.
type Status string

// Phase statuses.
const (
	StatusStart  Status = "start"
	StatusOK     Status = "ok"
	StatusFailed Status = "failed"
	StatusInfo   Status = "info"
)

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusStart, StatusOK, StatusFailed, StatusInfo:
		return true
	}
	return false
}

// Final phases: the guest sends one of these (status ok or failed) to say it is done.
const (
	// PhaseInstallComplete ends an install: the OS is on the target disk, the node has
	// rebooted from it, run its first-boot Ignition and its enabled units. A failure in
	// any install phase is followed by PhaseInstallComplete failed with the same details.
	PhaseInstallComplete = "install-complete"
	// PhaseBootComplete ends a boot that is not an install (a live boot with no target
	// disk, a later boot from disk): the node has booted and is ready.
	PhaseBootComplete = "boot-complete"
)

// Install phases of the conformance OS, reported in this order, each with status ok
// (a start before it is optional). The host follows an install by these; see
// InstallPhases.
const (
	// PhaseLiveBooted: the live ISO's init is up and reporting.
	PhaseLiveBooted = "live-booted"
	// PhaseIgnitionApplied: Ignition's fetch-offline and files stages ran on the embedded
	// config. Its details describe the files written (see IgnitionFileDetails).
	PhaseIgnitionApplied = "ignition-applied"
	// PhaseImagesImported: the precache data disk's images are in containers-storage on
	// the target root. Details: images=N; with no data disk, images=0 and reason=.
	PhaseImagesImported = "images-imported"
	// PhaseWrittenToDisk: the OS is on the target disk and bootable; the guest reboots.
	PhaseWrittenToDisk = "written-to-disk"
	// PhaseRebootedFromDisk: the first boot from the target disk (details: root device,
	// firmware, boot loader, the disk's serial).
	PhaseRebootedFromDisk = "rebooted-from-disk"
	// PhaseUnits: the enabled units of the installed root ran on its first boot.
	PhaseUnits = "units"
)

// InstallPhases returns the phases a successful conformance OS install reports with
// status ok, in order, the last one final. Other phases (init, ignition-*, units) may
// come in between as detail.
func InstallPhases() []string {
	return []string{PhaseLiveBooted, PhaseIgnitionApplied, PhaseImagesImported,
		PhaseWrittenToDisk, PhaseRebootedFromDisk, PhaseInstallComplete}
}

// Install phases of an OpenShift bootstrap-in-place install (seed 003) that the
// conformance OS does not have. With PhaseLiveBooted, PhaseWrittenToDisk,
// PhaseRebootedFromDisk and PhaseInstallComplete they make OpenShiftInstallPhases.
const (
	// PhaseBootkubeDone: the live system's bootkube.service finished the bootstrap
	// (/opt/openshift/.bootkube.done exists) and the master Ignition is ready to install.
	PhaseBootkubeDone = "bootkube-done"
	// PhaseAPIUp: on the installed system, the local kube-apiserver answers /readyz.
	PhaseAPIUp = "api-up"
	// PhaseBootstrapComplete: the installed system's post-reboot service approved the
	// node's CSRs, waited for the cluster version and removed the bootstrap leftovers.
	PhaseBootstrapComplete = "bootstrap-complete"
)

// OpenShiftInstallPhases returns the phases a successful OpenShift bootstrap-in-place
// install reports with status ok, in order, the last one final. images-imported comes on
// the installed disk's first boot, before CRI-O and kubelet start.
func OpenShiftInstallPhases() []string {
	return []string{PhaseLiveBooted, PhaseBootkubeDone, PhaseWrittenToDisk,
		PhaseRebootedFromDisk, PhaseImagesImported, PhaseAPIUp, PhaseBootstrapComplete, PhaseInstallComplete}
}

// Serial numbers of the virtio-blk disks the host attaches to a factory VM; the guest
// finds its disks by them (/sys/block/*/serial), with no udev needed.
const (
	// TargetDiskSerial is the empty disk the node installs itself to.
	TargetDiskSerial = "snofactory-target"
	// PrecacheDiskSerial is the read-only precache data disk (seeds/contract/precachedisk).
	PrecacheDiskSerial = "snofactory-precache"
)

// Details every failure report carries.
const (
	// DetailError is the one-line reason of a failure.
	DetailError = "error"
	// DetailLog is the tail of the failing step's log (Ignition's, the unit's output,
	// the import's), at most MaxLogDetailBytes.
	DetailLog = "log"
)

// MaxLogDetailBytes bounds a DetailLog value so a failure report stays well under
// MaxLineBytes; LogDetailLines is how many lines of the log's end it carries.
const (
	MaxLogDetailBytes = 16 << 10
	LogDetailLines    = 40
)

// Message is one line of the guest->host protocol.
type Message struct {
	Version int `json:"v"`
	// Boot identifies one boot of the guest (the kernel's boot_id); Seq restarts at 1 on
	// every boot, so (Boot, Seq) orders the messages.
	Boot string    `json:"boot"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Uptime is the guest's seconds since boot: the guest clock may be wrong, this is not.
	Uptime  float64           `json:"uptime,omitempty"`
	Phase   string            `json:"phase"`
	Status  Status            `json:"status"`
	Details map[string]string `json:"details,omitempty"`
}

// Final reports whether m ends an install or a boot.
func (m Message) Final() bool {
	return (m.Phase == PhaseInstallComplete || m.Phase == PhaseBootComplete || m.Phase == PhaseSealed || m.Phase == PhaseReconfigured ||
		m.Phase == PhaseAwaiting) &&
		(m.Status == StatusOK || m.Status == StatusFailed)
}

// Validate checks the fields every message must carry.
func (m Message) Validate() error {
	switch {
	case m.Version != ProtocolVersion:
		return fmt.Errorf("protocol version %d, want %d", m.Version, ProtocolVersion)
	case m.Seq == 0:
		return errors.New("missing sequence number")
	case m.Phase == "" || strings.ContainsAny(m.Phase, " \t\r\n"):
		return fmt.Errorf("bad phase name %q", m.Phase)
	case !m.Status.Valid():
		return fmt.Errorf("phase %s: unknown status %q", m.Phase, m.Status)
	}
	return nil
}

// Encode writes m as a single JSON line.
func Encode(w io.Writer, m Message) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("encode agent message: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode agent message: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write agent message: %w", err)
	}
	return nil
}

// MaxLineBytes bounds one message; details carry small values (hashes, short files).
const MaxLineBytes = 256 << 10

// Decoder reads messages from the host end of the port and checks their order.
type Decoder struct {
	r       *bufio.Reader
	lastSeq map[string]uint64
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), lastSeq: map[string]uint64{}}
}

// ProtocolError is a line that is not a valid message, or a message out of order. The
// stream stays usable: the caller decides whether it is fatal.
type ProtocolError struct {
	Line string
	Err  error
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("agent protocol: %v (line %.120q)", e.Err, e.Line)
}
func (e *ProtocolError) Unwrap() error { return e.Err }

// Next returns the next message. It returns io.EOF at the end of the stream and a
// *ProtocolError for a bad line (call Next again to continue).
func (d *Decoder) Next() (Message, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return Message{}, err
		}
		// The guest may write NULs or a partial line when the port is reopened after a
		// reboot; only a line that starts a JSON object is a message.
		line = bytes.TrimLeft(line, "\x00\r\n\t ")
		line = bytes.TrimRight(line, "\r\n\t ")
		if len(line) == 0 {
			continue
		}
		var m Message
		if err := strictjson.DecodeOpen(line, &m); err != nil {
			return Message{}, &ProtocolError{Line: string(line), Err: err}
		}
		if err := m.Validate(); err != nil {
			return Message{}, &ProtocolError{Line: string(line), Err: err}
		}
		if last := d.lastSeq[m.Boot]; m.Seq <= last {
			return Message{}, &ProtocolError{Line: string(line),
				Err: fmt.Errorf("sequence %d after %d in boot %s", m.Seq, last, m.Boot)}
		}
		d.lastSeq[m.Boot] = m.Seq
		return m, nil
	}
}

func (d *Decoder) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, isPrefix, err := d.r.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) > 0 {
				return buf, nil
			}
			return nil, err
		}
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes {
			// Drain the rest of the oversized line so the stream resynchronises.
			for isPrefix && err == nil {
				_, isPrefix, err = d.r.ReadLine()
			}
			return nil, &ProtocolError{Line: string(buf[:120]), Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
		}
		if !isPrefix {
			return buf, nil
		}
	}
}

// Phases of a seed's site reconfiguration (snofactory agent reconfigure).
const (
	// PhaseReconfigureStep is one reconfiguration step: status start, then ok or failed
	// (info when it was already done for the same site config before a reboot). Details:
	// step=NAME plus what the step applied (never the pull secret).
	PhaseReconfigureStep = "reconfigure-step"
	// PhaseReconfigured ends a reconfiguration: status ok, or failed with DetailError
	// naming the failed step and why.
	PhaseReconfigured = "reconfigured"
)

// MaxDetailFileBytes bounds how much of a file a message's details carry.
const MaxDetailFileBytes = 4 << 10

// ReconfigureUnitName is the site's reconfiguration service: the seal installs and enables
// it, the hook disables it once it succeeded, and render's MachineConfigs never name it.
const ReconfigureUnitName = "snofactory-reconfigure.service"
