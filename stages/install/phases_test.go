package install

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

func msg(phase string, status wire.Status, details ...string) wire.Message {
	m := wire.Message{Phase: phase, Status: status}
	for i := 0; i+1 < len(details); i += 2 {
		if m.Details == nil {
			m.Details = map[string]string{}
		}
		m.Details[details[i]] = details[i+1]
	}
	return m
}

func TestTracker(t *testing.T) {
	ok := wire.StatusOK
	conformance := []wire.Message{msg("init", ok), msg(wire.PhaseLiveBooted, ok), msg("ignition-files", wire.StatusStart),
		msg(wire.PhaseIgnitionApplied, ok), msg(wire.PhaseImagesImported, ok), msg(wire.PhaseWrittenToDisk, ok),
		msg(wire.PhaseRebootedFromDisk, ok), msg(wire.PhaseUnits, ok), msg(wire.PhaseInstallComplete, ok)}
	tests := []struct {
		name     string
		target   oskind.Kind
		msgs     []wire.Message
		finished bool
		wantErr  string
		wantLog  string
	}{
		{name: "conformance install in order", target: "coreos", msgs: conformance, finished: true},
		{name: "openshift install in order", target: oskind.OpenShift, finished: true, msgs: []wire.Message{
			msg(wire.PhaseLiveBooted, ok), msg(wire.PhaseBootkubeDone, ok), msg(wire.PhaseWrittenToDisk, ok),
			msg(wire.PhaseRebootedFromDisk, ok), msg(wire.PhaseImagesImported, ok), msg(wire.PhaseAPIUp, ok), msg(wire.PhaseBootstrapComplete, ok), msg(wire.PhaseInstallComplete, ok)}},
		{name: "stops short", target: "coreos", msgs: conformance[:5]},
		{name: "a skipped phase", target: "coreos", msgs: []wire.Message{msg(wire.PhaseLiveBooted, ok), msg(wire.PhaseWrittenToDisk, ok)},
			wantErr: "reported written-to-disk before ignition-applied"},
		{name: "back in the live ISO", target: "coreos", msgs: append(conformance[:7:7], msg(wire.PhaseLiveBooted, ok)),
			wantErr: "reported live-booted again after rebooted-from-disk"},
		{name: "a unit fails", target: "coreos", msgs: append(conformance[:7:7],
			msg(wire.PhaseUnits, wire.StatusFailed, wire.DetailError, "unit broken.service failed", wire.DetailLog, "exit status 3\nno such file")),
			wantErr: "phase units failed: unit broken.service failed", wantLog: "no such file"},
		{name: "start and info messages do not advance", target: "coreos",
			msgs: []wire.Message{msg(wire.PhaseLiveBooted, wire.StatusStart), msg(wire.PhaseLiveBooted, wire.StatusInfo)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(planFor(tt.target))
			var finished bool
			var err error
			for i, m := range tt.msgs {
				finished, err = tr.observe(m, time.Duration(i)*time.Second)
				if err != nil || finished {
					break
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.wantLog) {
					t.Fatalf("err %v, want %q with log %q", err, tt.wantErr, tt.wantLog)
				}
				var gf *GuestFailure
				if tt.wantLog != "" && !errors.As(err, &gf) {
					t.Fatalf("a guest failure is not a *GuestFailure: %T", err)
				}
				return
			}
			if err != nil || finished != tt.finished {
				t.Fatalf("finished %v err %v, want finished %v", finished, err, tt.finished)
			}
			if tt.finished && (len(tr.done) != len(tr.plan) || tr.expecting() != "") {
				t.Fatalf("done %v of plan %v", tr.done, tr.plan)
			}
		})
	}
}

func TestLastSeenNamesTheLastReport(t *testing.T) {
	tr := newTracker(planFor("coreos"))
	if got := tr.lastSeen(); !strings.Contains(got, "never reported") {
		t.Fatalf("before any message: %q", got)
	}
	tr.observe(msg(wire.PhaseLiveBooted, wire.StatusOK), 0)
	tr.observe(msg("ignition-files", wire.StatusStart), 0)
	if got := tr.lastSeen(); got != "ignition-files start" || tr.expecting() != wire.PhaseIgnitionApplied {
		t.Fatalf("last seen %q, expecting %q", got, tr.expecting())
	}
}
