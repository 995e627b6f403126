package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// parseEvents reads a `--progress json` stream: RFC 7464 records, each RS, JSON, LF.
func parseEvents(stream []byte) ([]pipeline.Event, error) {
	var events []pipeline.Event
	for i, rec := range bytes.Split(stream, []byte{0x1e}) {
		rec = bytes.TrimSpace(rec)
		if len(rec) == 0 {
			continue
		}
		var e pipeline.Event
		if err := json.Unmarshal(rec, &e); err != nil {
			return nil, fmt.Errorf("progress record %d %q: %w", i, rec, err)
		}
		events = append(events, e)
	}
	return events, nil
}

// stagesTime sums the run record's durations of stages, each of which must have run (a
// cache hit measures nothing).
func stagesTime(rec *pipeline.Record, stages ...string) (time.Duration, error) {
	var total time.Duration
	for _, name := range stages {
		found := false
		for _, s := range rec.Stages {
			if s.Name != name {
				continue
			}
			if s.Cache != "miss" {
				return 0, fmt.Errorf("stage %s was a cache %s, not a run", name, s.Cache)
			}
			total += time.Duration(s.Duration)
			found = true
		}
		if !found {
			return 0, fmt.Errorf("%s has no stage %s", pipeline.RecordFile, name)
		}
	}
	return total, nil
}

// guestWaitShare is the share of the stages' run-record time spent waiting on the guest,
// and that time: see guestWait.
func guestWaitShare(events []pipeline.Event, rec *pipeline.Record, stages ...string) (float64, time.Duration, error) {
	total, err := stagesTime(rec, stages...)
	if err != nil {
		return 0, 0, err
	}
	if total <= 0 {
		return 0, 0, fmt.Errorf("stages %v took no time", stages)
	}
	var wait time.Duration
	for _, s := range stages {
		w, err := guestWait(events, s)
		if err != nil {
			return 0, 0, err
		}
		wait += w
	}
	return wait.Seconds() / total.Seconds(), wait, nil
}

// The log lines a stage's wait on a guest starts at: vm.Start's when the stage boots a VM
// (stages/internal/vm, Start), validate's when it takes over the VM install left running
// (stages/validate, bootFacts), as the one-boot build does.
const (
	vmStartLine    = "starting VM "
	vmTakeoverLine = "validating the node install left running"
)

// guestWait is the time a stage's VMs ran from their start (vm.Start's "starting VM" log
// line) or from the stage taking over install's running VM, to the guest's final message
// (install-complete or boot-complete, ok or failed), summed over the stage's VMs, from the
// log events' timestamps. A VM logs through the stage that started it (vm.Machine keeps
// that stage's logger), so a taken-over VM's final message is taken from any stage.
func guestWait(events []pipeline.Event, stage string) (time.Duration, error) {
	var total time.Duration
	var started time.Time
	vms, handed := 0, false
	for _, e := range events {
		if e.Kind != pipeline.EventLog {
			continue
		}
		own := e.Stage == stage
		switch {
		case own && (strings.HasPrefix(e.Message, vmStartLine) || strings.HasPrefix(e.Message, vmTakeoverLine)):
			if !started.IsZero() {
				return 0, fmt.Errorf("stage %s started a VM before the previous one sent its final message", stage)
			}
			started, handed = e.Time, strings.HasPrefix(e.Message, vmTakeoverLine)
			vms++
		case !started.IsZero() && (own || handed) && finalGuestMessage(e.Message):
			total += e.Time.Sub(started)
			started = time.Time{}
		}
	}
	switch {
	case vms == 0:
		return 0, fmt.Errorf("stage %s logged neither a VM start nor taking over install's VM", stage)
	case !started.IsZero():
		return 0, fmt.Errorf("a VM of stage %s logged no final guest message", stage)
	}
	return total, nil
}

// vmStarts is how many VMs the stages booted ("starting VM" log lines): one for install and
// validate together when install hands its VM on.
func vmStarts(events []pipeline.Event, stages ...string) int {
	n := 0
	for _, e := range events {
		if e.Kind == pipeline.EventLog && slices.Contains(stages, e.Stage) && strings.HasPrefix(e.Message, vmStartLine) {
			n++
		}
	}
	return n
}

// finalGuestMessage reports whether a log line relays the guest's final message for an
// install or a boot: the install's "guest phase=… status=…" and vm's "guest phase vm=…
// phase=… status=…". A factory VM's awaiting-command is final too, but it ends a command,
// not the boot the stage waits for.
func finalGuestMessage(line string) bool {
	if !strings.HasPrefix(line, "guest ") {
		return false
	}
	var m wire.Message
	for _, f := range strings.Fields(line) {
		switch k, v, _ := strings.Cut(f, "="); k {
		case "phase":
			m.Phase = v
		case "status":
			m.Status = wire.Status(v)
		}
	}
	return m.Final() && (m.Phase == wire.PhaseInstallComplete || m.Phase == wire.PhaseBootComplete)
}
