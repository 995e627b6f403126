package vm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

func requireQemu(t *testing.T) string {
	t.Helper()
	return testbin.Require(t, "qemu-system-x86_64", "qemu-system-x86")
}

// What qemu prints before aborting on a /dev/kvm it cannot use (seen on hosts whose KVM
// rejects the MSRs qemu sets).
const (
	qemuAbortCause  = "qemu-system-x86_64: error: failed to set MSR 0x48f to 0x7fefff00036dfb"
	qemuAbortAssert = "qemu-system-x86_64: ../target/i386/kvm/kvm.c:2953: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed."
)

// script writes an executable shell script standing in for qemu.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qemu-system-x86_64")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// device is an openable file standing in for a /dev/kvm node.
func device(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// machineKind is one kind of host the probe meets, forced through the Prober seam so
// every kind runs on every machine.
type machineKind struct {
	name   string
	prober func(t *testing.T) Prober
	// works is the verdict: KVM, or TCG with a reason holding every one of reason.
	works  bool
	reason []string
	// runsQemu says the probe gets as far as running qemu (the device opens), so a
	// cancellation can land while it runs.
	runsQemu bool
}

func machineKinds() []machineKind {
	return []machineKind{
		{
			name: "no device",
			prober: func(t *testing.T) Prober {
				return Prober{Qemu: requireQemu(t), Device: filepath.Join(t.TempDir(), "kvm")}
			},
			reason: []string{"kvm probe: open ", "no such file or directory"},
		},
		{
			name: "qemu aborts",
			prober: func(t *testing.T) Prober {
				q := script(t, "cat >&2 <<'EOF'\n"+qemuAbortCause+"\n"+qemuAbortAssert+"\nEOF\nkill -ABRT $$")
				return Prober{Qemu: q, Device: device(t)}
			},
			reason:   []string{"qemu -accel kvm failed", "signal: aborted", qemuAbortCause, "kvm_buf_set_msrs"},
			runsQemu: true,
		},
		{
			// The real qemu, refusing the accelerator outright.
			name: "qemu rejects the accelerator",
			prober: func(t *testing.T) Prober {
				return Prober{Qemu: requireQemu(t), Device: device(t), GuestAccel: "nosuchaccel"}
			},
			reason:   []string{"qemu -accel nosuchaccel failed", "exit status 1", "invalid accelerator nosuchaccel"},
			runsQemu: true,
		},
		{
			// A guest that never finishes: nested virtualisation at its worst.
			name: "too slow",
			prober: func(t *testing.T) Prober {
				return Prober{Qemu: script(t, "exec sleep 60"), Device: device(t), Timeout: 100 * time.Millisecond}
			},
			reason:   []string{"did not finish within 1.1s", "too slow or stalled", "the probe never started"},
			runsQemu: true,
		},
		{
			// The probe guest runs for real under TCG, with time to spare, and its success
			// takes the KVM path.
			name: "working KVM",
			prober: func(t *testing.T) Prober {
				return Prober{Qemu: requireQemu(t), Device: device(t), GuestAccel: AccelTCG, Timeout: 20 * time.Second}
			},
			works:    true,
			runsQemu: true,
		},
	}
}

func TestResolveOnEachKindOfMachine(t *testing.T) {
	for _, k := range machineKinds() {
		t.Run(k.name, func(t *testing.T) {
			var logs bytes.Buffer
			p := k.prober(t)
			p.Log = slog.New(slog.NewTextHandler(&logs, nil))

			acc, err := p.Resolve(context.Background(), AccelAuto)
			if err != nil {
				t.Fatalf("auto: %v", err)
			}
			if k.works {
				if acc.Name != AccelKVM || acc.Scale(time.Minute) != time.Minute {
					t.Fatalf("auto on working KVM: got %+v, want KVM with timeouts unscaled", acc)
				}
				if logs.Len() > 0 {
					t.Errorf("working KVM logged: %s", logs.String())
				}
			} else {
				if acc.Name != AccelTCG || acc.Scale(time.Minute) != tcgTimeoutScale*time.Minute {
					t.Fatalf("auto: got %+v, want TCG with timeouts scaled by %d", acc, tcgTimeoutScale)
				}
				for _, want := range k.reason {
					if !strings.Contains(acc.Reason, want) {
						t.Errorf("reason %q does not say %q", acc.Reason, want)
					}
				}
				if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "falling back to TCG") || !strings.Contains(got, k.reason[0]) {
					t.Errorf("the fall-back is not a visible warning with its reason: %q", got)
				}
			}

			acc, err = p.Resolve(context.Background(), AccelKVM)
			switch {
			case k.works && (err != nil || acc.Name != AccelKVM):
				t.Fatalf("kvm on working KVM: got %+v, %v", acc, err)
			case !k.works && err == nil:
				t.Fatalf("kvm requested where it does not work: got %+v, want an error", acc)
			case !k.works && (!strings.Contains(err.Error(), "KVM requested but not usable") || !strings.Contains(err.Error(), k.reason[0])):
				t.Fatalf("kvm requested: the error does not say why: %v", err)
			}
		})
	}
}

// A build cancelled before or while the probe runs must come back as cancelled, never
// as a verdict on KVM and a silent fall-back to TCG, whatever kind of machine it is.
func TestProbeHonoursParentCancel(t *testing.T) {
	for _, k := range machineKinds() {
		for _, when := range []string{"before", "during"} {
			if when == "during" && !k.runsQemu {
				continue // the probe ends before it runs anything a cancellation could land in
			}
			t.Run(k.name+"/"+when, func(t *testing.T) {
				p := k.prober(t)
				p.Log = slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if when == "before" {
					cancel()
				} else {
					cancelOnceRunning(t, &p, cancel)
				}
				acc, err := p.Resolve(ctx, AccelAuto)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("got %+v, %v; want context.Canceled", acc, err)
				}
				if strings.Contains(err.Error(), "too slow") {
					t.Fatalf("cancellation reported as a slow accelerator: %v", err)
				}
			})
		}
	}
}

// cancelOnceRunning makes p's qemu a stand-in that reports it has started and then runs
// until it is killed, with no probe timeout of its own: cancel is called once it runs, and
// Resolve can only return by noticing the cancellation and killing it.
func cancelOnceRunning(t *testing.T, p *Prober, cancel context.CancelFunc) {
	t.Helper()
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	p.Qemu = script(t, "echo started >"+started+"\nexec sleep infinity")
	p.Timeout = time.Hour
	go func() {
		// Opening the pipe waits for the stand-in to open its end.
		if f, err := os.Open(started); err == nil {
			io.Copy(io.Discard, f)
			f.Close()
		}
		cancel()
	}()
}

func TestResolveRequests(t *testing.T) {
	// tcg never probes: a qemu that does not exist is never run.
	p := Prober{Qemu: filepath.Join(t.TempDir(), "no-qemu"), Device: filepath.Join(t.TempDir(), "no-kvm")}
	acc, err := p.Resolve(context.Background(), AccelTCG)
	if err != nil || acc.Name != AccelTCG || acc.Reason != "requested" || acc.Scale(time.Second) != tcgTimeoutScale*time.Second {
		t.Fatalf("tcg: got %+v, %v", acc, err)
	}
	if _, err := p.Resolve(context.Background(), "hvf"); err == nil || !strings.Contains(err.Error(), `unknown accelerator "hvf"`) {
		t.Fatalf("unknown accelerator: %v", err)
	}
	if d := (Prober{}).withDefaults(); d.Device != "/dev/kvm" || d.Qemu != "qemu-system-x86_64" || d.GuestAccel != AccelKVM || d.Timeout != ProbeTimeout {
		t.Fatalf("the zero Prober does not probe this host's KVM: %+v", d)
	}
}

func TestLastLines(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"one\n", "one"},
		{"a\nb\n\nc\nd\n", "b | c | d"},
		{"  x  \r\n", "x"},
	} {
		if got := lastLines(tt.in, 3); got != tt.want {
			t.Errorf("lastLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
