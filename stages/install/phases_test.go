package install

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/agent"
	"github.com/snofactory/snofactory/seeds/target"
)

func msg(phase string, status agent.Status, details ...string) agent.Message {
	m := agent.Message{Phase: phase, Status: status}
	for i := 0; i+1 < len(details); i += 2 {
		if m.Details == nil {
			m.Details = map[string]string{}
		}
		m.Details[details[i]] = details[i+1]
	}
	return m
}

func TestTracker(t *testing.T) {
	ok := agent.StatusOK
	conformance := []agent.Message{msg("init", ok), msg(agent.PhaseLiveBooted, ok), msg("ignition-files", agent.StatusStart),
		msg(agent.PhaseIgnitionApplied, ok), msg(agent.PhaseImagesImported, ok), msg(agent.PhaseWrittenToDisk, ok),
		msg(agent.PhaseRebootedFromDisk, ok), msg(agent.PhaseUnits, ok), msg(agent.PhaseInstallComplete, ok)}
	tests := []struct {
		name     string
		target   target.Target
		msgs     []agent.Message
		finished bool
		wantErr  string
		wantLog  string
	}{
		{name: "conformance install in order", target: "coreos", msgs: conformance, finished: true},
		{name: "openshift install in order", target: target.OpenShift, finished: true, msgs: []agent.Message{
			msg(agent.PhaseLiveBooted, ok), msg(agent.PhaseBootkubeDone, ok), msg(agent.PhaseWrittenToDisk, ok),
			msg(agent.PhaseRebootedFromDisk, ok), msg(agent.PhaseImagesImported, ok), msg(agent.PhaseAPIUp, ok), msg(agent.PhaseBootstrapComplete, ok), msg(agent.PhaseInstallComplete, ok)}},
		{name: "stops short", target: "coreos", msgs: conformance[:5]},
		{name: "a skipped phase", target: "coreos", msgs: []agent.Message{msg(agent.PhaseLiveBooted, ok), msg(agent.PhaseWrittenToDisk, ok)},
			wantErr: "reported written-to-disk before ignition-applied"},
		{name: "back in the live ISO", target: "coreos", msgs: append(conformance[:7:7], msg(agent.PhaseLiveBooted, ok)),
			wantErr: "reported live-booted again after rebooted-from-disk"},
		{name: "a unit fails", target: "coreos", msgs: append(conformance[:7:7],
			msg(agent.PhaseUnits, agent.StatusFailed, agent.DetailError, "unit broken.service failed", agent.DetailLog, "exit status 3\nno such file")),
			wantErr: "phase units failed: unit broken.service failed", wantLog: "no such file"},
		{name: "start and info messages do not advance", target: "coreos",
			msgs: []agent.Message{msg(agent.PhaseLiveBooted, agent.StatusStart), msg(agent.PhaseLiveBooted, agent.StatusInfo)}},
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
	tr.observe(msg(agent.PhaseLiveBooted, agent.StatusOK), 0)
	tr.observe(msg("ignition-files", agent.StatusStart), 0)
	if got := tr.lastSeen(); got != "ignition-files start" || tr.expecting() != agent.PhaseIgnitionApplied {
		t.Fatalf("last seen %q, expecting %q", got, tr.expecting())
	}
}
