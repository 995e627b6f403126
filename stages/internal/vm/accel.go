package vm

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// Accel is the accelerator a caller asks for.
type Accel string

const (
	AccelAuto Accel = "auto"
	AccelKVM  Accel = "kvm"
	AccelTCG  Accel = "tcg"
)

// Timeout scale factors: callers multiply their phase timeouts by Accelerator.TimeoutScale.
const (
	kvmTimeoutScale = 1
	tcgTimeoutScale = 8
)

// Accelerator is the accelerator a VM will run with.
type Accelerator struct {
	Name Accel `json:"name"`
	// TimeoutScale multiplies phase timeouts written for KVM speed.
	TimeoutScale float64 `json:"timeoutScale"`
	// Reason says why this accelerator was chosen (the probe's verdict).
	Reason string `json:"reason"`
}

// Scale multiplies d by the timeout scale.
func (a Accelerator) Scale(d time.Duration) time.Duration {
	s := a.TimeoutScale
	if s <= 0 {
		s = 1
	}
	return time.Duration(float64(d) * s)
}

// TCG is the software accelerator, always available.
func TCG(reason string) Accelerator {
	return Accelerator{Name: AccelTCG, TimeoutScale: tcgTimeoutScale, Reason: reason}
}

// probeGuest is a boot sector that enters long mode after first-touching 64 MiB of RAM
// and then exits qemu with status probeExitStatus; see probe/probe.S.
//
//go:embed probe/probe.bin
var probeGuest []byte

const (
	probeExitStatus = 33 // isa-debug-exit: (0x10 << 1) | 1
	// ProbeTimeout: a working KVM runs the probe in well under 100 ms of guest time; TCG
	// in ~150 ms. A nested KVM that needs seconds for it would take minutes to boot.
	ProbeTimeout = 1500 * time.Millisecond
)

// Prober decides whether KVM is usable by running a small guest under it. The zero value
// probes this host: /dev/kvm and qemu-system-x86_64 on PATH. Its fields are the seam that
// lets a test force each kind of machine on any host: no device (Device names a missing
// file), a device qemu aborts on or stalls with (Qemu is a script that does so), and
// working KVM (Device names any openable file and GuestAccel is tcg, so the probe guest
// runs for real and its success reads as KVM).
type Prober struct {
	// Qemu is the qemu binary; empty means qemu-system-x86_64 on PATH.
	Qemu string
	// Device is the KVM device node, opened read-write first; empty means /dev/kvm.
	Device string
	// GuestAccel is the qemu accelerator the probe guest runs under; empty means kvm.
	// Whatever it is, a successful probe means "use KVM".
	GuestAccel Accel
	// Timeout bounds the probe guest's run; zero means ProbeTimeout.
	Timeout time.Duration
	// Log receives the fall-back warning; nil means slog.Default().
	Log *slog.Logger
}

func (p Prober) withDefaults() Prober {
	if p.Qemu == "" {
		p.Qemu = "qemu-system-x86_64"
	}
	if p.Device == "" {
		p.Device = "/dev/kvm"
	}
	if p.GuestAccel == "" {
		p.GuestAccel = AccelKVM
	}
	if p.Timeout <= 0 {
		p.Timeout = ProbeTimeout
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	return p
}

// ResolveAccel turns want into the accelerator to use on this host; see Prober.Resolve.
func ResolveAccel(ctx context.Context, qemu string, want Accel, log *slog.Logger) (Accelerator, error) {
	return Prober{Qemu: qemu, Log: log}.Resolve(ctx, want)
}

// Resolve turns want into the accelerator to use. auto probes KVM and falls back to TCG
// with a warning if the probe fails; kvm fails if the probe fails; tcg never probes. A
// context that ends before the verdict is returned as the error, never as a verdict: a
// cancelled build says nothing about KVM.
func (p Prober) Resolve(ctx context.Context, want Accel) (Accelerator, error) {
	p = p.withDefaults()
	switch want {
	case AccelTCG:
		return TCG("requested"), nil
	case AccelKVM, AccelAuto, "":
	default:
		return Accelerator{}, fmt.Errorf("unknown accelerator %q (want auto, kvm or tcg)", want)
	}
	if err := ctx.Err(); err != nil {
		return Accelerator{}, fmt.Errorf("choosing the accelerator: %w", err)
	}
	err := p.Probe(ctx)
	if ctx.Err() != nil {
		return Accelerator{}, fmt.Errorf("choosing the accelerator: %w", ctx.Err())
	}
	if err == nil {
		return Accelerator{Name: AccelKVM, TimeoutScale: kvmTimeoutScale, Reason: "probe guest ran under KVM"}, nil
	}
	if want == AccelKVM {
		return Accelerator{}, fmt.Errorf("KVM requested but not usable: %w", err)
	}
	acc := TCG("KVM not usable: " + err.Error())
	p.Log.Warn("KVM is not usable; falling back to TCG software emulation: VMs will be much slower and phase timeouts are scaled",
		"reason", err.Error(), "timeoutScale", acc.TimeoutScale)
	return acc, nil
}

// Probe opens the KVM device and runs the probe guest; it returns nil only if the guest
// completes within the timeout.
func (p Prober) Probe(ctx context.Context) error {
	p = p.withDefaults()
	f, err := os.OpenFile(p.Device, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("kvm probe: %w", err)
	}
	f.Close()
	return runProbe(ctx, p.Qemu, p.GuestAccel, p.Timeout)
}

// runProbe runs the probe guest with accelerator acc. If ctx itself ends, that is
// what it returns: a cancelled build says nothing about KVM.
func runProbe(ctx context.Context, qemu string, acc Accel, timeout time.Duration) error {
	dir, err := os.MkdirTemp("", "sfvm-probe-")
	if err != nil {
		return fmt.Errorf("kvm probe: %w", err)
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "probe.img")
	if err := os.WriteFile(img, probeGuest, 0o600); err != nil {
		return fmt.Errorf("kvm probe: %w", err)
	}
	// Time only the guest: qemu's own start-up is not what we measure, so the timeout
	// starts after a short fixed allowance for it.
	pctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	defer cancel()
	cmd := exec.Command(qemu, "-accel", string(acc), "-machine", "pc", "-m", "128",
		"-nodefaults", "-display", "none", "-no-reboot", "-no-user-config",
		"-drive", "file="+optValue(img)+",format=raw,if=ide,snapshot=on",
		"-chardev", "stdio,id=dbg", "-device", "isa-debugcon,iobase=0x402,chardev=dbg",
		"-device", "isa-debug-exit,iobase=0xf4,iosize=0x04")
	var out bytes.Buffer // the debugcon port: firmware log, then the probe's markers
	cmd.Stdout = &out
	start := time.Now()
	err = pipeline.RunTool(pctx, cmd, nil)
	took := time.Since(start)
	var te *pipeline.ToolError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("kvm probe under %s: %w", acc, ctx.Err())
	case pctx.Err() != nil:
		return fmt.Errorf("probe guest did not finish within %s under %s (reached %s of R,P,M,L; present but too slow or stalled, e.g. nested virtualisation)",
			timeout+time.Second, acc, progress(out.String()))
	case errors.As(err, &te) && te.ExitCode == probeExitStatus:
		if took > timeout+time.Second {
			return fmt.Errorf("probe guest took %s under %s", took.Round(time.Millisecond), acc)
		}
		return nil
	case err != nil:
		if te != nil {
			return fmt.Errorf("qemu -accel %s failed: %w: %s", acc, te.Err, lastLines(te.StderrTail, stderrLines))
		}
		return fmt.Errorf("qemu -accel %s failed: %w", acc, err)
	default:
		return fmt.Errorf("probe guest exited without finishing (reached %s)", progress(out.String()))
	}
}

// progress extracts the probe's R/P/M/L step markers from the debugcon output, where
// the firmware's log comes first.
func progress(s string) string {
	const booting = "Booting from 0000:7c00"
	i := strings.LastIndex(s, booting)
	if i < 0 {
		return "firmware (the probe never started)"
	}
	return "probe step " + strings.TrimSpace(s[i+len(booting):])
}

// stderrLines is how much of qemu's stderr an error carries: an abort prints its cause a
// line or two before the assertion that ends it.
const stderrLines = 3

// lastLines returns the last n non-empty lines of s, joined by " | " to fit in one message.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, " | ")
}
