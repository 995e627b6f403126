package install

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// planFor is the ordered phases an install reports, by target type.
func planFor(t oskind.Kind) []string {
	if t == oskind.OpenShift {
		return wire.OpenShiftInstallPhases()
	}
	return wire.InstallPhases()
}

// PhaseTime is when the guest reported a phase done, for the output record.
type PhaseTime struct {
	Phase string `json:"phase"`
	// After is the time since the VM started.
	After time.Duration `json:"after"`
}

// tracker follows an install through its plan: every planned phase must report ok, in
// order; other phases are detail. A failed report ends the install.
type tracker struct {
	plan []string
	next int
	// last is the last message seen, of any phase, for error messages.
	last *wire.Message
	done []PhaseTime
}

func newTracker(plan []string) *tracker { return &tracker{plan: plan} }

// expecting is the phase the install waits for ("" when finished).
func (t *tracker) expecting() string {
	if t.next >= len(t.plan) {
		return ""
	}
	return t.plan[t.next]
}

// lastSeen describes the last phase the guest reported, for timeouts.
func (t *tracker) lastSeen() string {
	if t.last == nil {
		return "none (the guest never reported)"
	}
	return fmt.Sprintf("%s %s", t.last.Phase, t.last.Status)
}

// observe takes one message. It returns finished once the last planned phase is ok, or an
// error for a failure report or a planned phase out of order.
func (t *tracker) observe(m wire.Message, after time.Duration) (finished bool, err error) {
	t.last = &m
	if m.Status == wire.StatusFailed {
		return false, &GuestFailure{Phase: m.Phase, Reason: m.Details[wire.DetailError], Log: m.Details[wire.DetailLog]}
	}
	i := slices.Index(t.plan, m.Phase)
	if i < 0 || m.Status != wire.StatusOK {
		return false, nil
	}
	switch {
	case i < t.next:
		return false, fmt.Errorf("the guest reported %s again after %s (did the VM reboot into the live ISO?)", m.Phase, t.plan[t.next-1])
	case i > t.next:
		return false, fmt.Errorf("the guest reported %s before %s: the install skipped a phase", m.Phase, t.plan[t.next])
	}
	t.done = append(t.done, PhaseTime{Phase: m.Phase, After: after})
	t.next++
	return t.next == len(t.plan), nil
}

// GuestFailure is a failure the guest reported, with the log it sent.
type GuestFailure struct {
	Phase  string
	Reason string
	Log    string
}

func (e *GuestFailure) Error() string {
	msg := fmt.Sprintf("the guest reported phase %s failed: %s", e.Phase, e.Reason)
	if log := strings.TrimSpace(e.Log); log != "" {
		msg += "\n--- guest log ---\n" + log
	}
	return msg
}
