package vm

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func requireQemu(t *testing.T) string {
	t.Helper()
	q, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64 not found: install the Debian package qemu-system-x86 (make deps): %v", err)
	}
	return q
}

// The probe guest itself must be sound: under TCG (always available) it reaches long
// mode and exits with the agreed status. Otherwise a KVM verdict would mean nothing.
func TestProbeGuestRunsUnderTCG(t *testing.T) {
	q := requireQemu(t)
	if err := runProbe(context.Background(), q, AccelTCG, 10*time.Second); err != nil {
		t.Fatalf("probe guest under TCG: %v", err)
	}
}

func TestResolveAccel(t *testing.T) {
	q := requireQemu(t)
	ctx := context.Background()

	acc, err := ResolveAccel(ctx, q, AccelTCG, nil)
	if err != nil || acc.Name != AccelTCG || acc.TimeoutScale != tcgTimeoutScale {
		t.Fatalf("tcg: got %+v, %v", acc, err)
	}
	if _, err := ResolveAccel(ctx, q, "hvf", nil); err == nil {
		t.Fatal("unknown accelerator accepted")
	}

	start := time.Now()
	probeErr := ProbeKVM(ctx, q, ProbeTimeout)
	if took := time.Since(start); took > ProbeTimeout+3*time.Second {
		t.Fatalf("probe took %s; it must give up quickly", took)
	}
	acc, err = ResolveAccel(ctx, q, AccelAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("KVM probe: %v; auto chose %+v", probeErr, acc)
	if (probeErr == nil) != (acc.Name == AccelKVM) {
		t.Fatalf("auto chose %s but the probe said %v", acc.Name, probeErr)
	}
	if acc.Name == AccelTCG && acc.Scale(time.Minute) != tcgTimeoutScale*time.Minute {
		t.Fatalf("TCG fallback does not scale timeouts: %+v", acc)
	}
	_, err = ResolveAccel(ctx, q, AccelKVM, nil)
	if (err == nil) != (probeErr == nil) {
		t.Fatalf("explicit kvm: %v, probe: %v", err, probeErr)
	}
}

// A build cancelled while the probe runs must come back as cancelled, not as a
// verdict on KVM and a silent fall-back to TCG.
func TestProbeHonoursParentCancel(t *testing.T) {
	q := requireQemu(t)
	for _, tt := range []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"probe", func(ctx context.Context) error { return runProbe(ctx, q, AccelTCG, 10*time.Second) }},
		{"resolve", func(ctx context.Context) error {
			acc, err := ResolveAccel(ctx, q, AccelAuto, nil)
			if err == nil {
				return fmt.Errorf("chose %+v", acc)
			}
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// qemu alone takes longer than this to start
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			err := tt.run(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if strings.Contains(err.Error(), "too slow") {
				t.Fatalf("cancellation reported as a slow accelerator: %v", err)
			}
			if took := time.Since(start); took > 6*time.Second {
				t.Fatalf("took %s to notice the cancellation", took)
			}
		})
	}
}
