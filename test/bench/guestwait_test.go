package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/progress"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// logAt is a log event of stage at t0+sec, as the engine relays a stage's slog lines.
func logAt(stage string, sec float64, msg string) pipeline.Event {
	return pipeline.Event{Time: t0.Add(time.Duration(sec * float64(time.Second))), Kind: pipeline.EventLog, Stage: stage, Level: "info", Message: msg}
}

func record(stages ...pipeline.StageRecord) *pipeline.Record {
	return &pipeline.Record{Status: pipeline.StatusSucceeded, Stages: stages}
}

func ran(name string, sec float64) pipeline.StageRecord {
	return pipeline.StageRecord{Name: name, Cache: "miss", Duration: pipeline.Duration(sec * float64(time.Second))}
}

// The lines as install's follower and vm.Machine.WaitFinal log them.
const (
	startInstall  = "starting VM name=install accel=tcg console=/out/logs/install-console.log"
	startValidate = "starting VM name=validate accel=tcg console=/out/logs/validate-console.log"
	liveBooted    = "guest phase=live-booted status=ok uptime=3.1"
	installStart  = "guest phase=install-complete status=start uptime=30"
	installDone   = "guest phase=install-complete status=ok uptime=31.5"
	installFailed = "guest phase=install-complete status=failed uptime=12"
	bootDone      = "guest phase vm=validate phase=boot-complete status=ok seq=9 uptime=8.2"
	// The one-boot build: install freezes, snapshots and thaws the node (each command
	// answered by awaiting-command), and validate takes the running VM over.
	awaiting     = "guest phase vm=install phase=awaiting-command status=ok seq=12 uptime=33"
	takeover     = "validating the node install left running console=/out/logs/install-console.log"
	handedFacts  = "guest phase vm=install phase=facts status=ok seq=15 uptime=36"
	handedBooted = "guest phase vm=install phase=boot-complete status=ok seq=16 uptime=36.2"
)

func TestGuestWaitShare(t *testing.T) {
	both := record(ran("live-iso", 2), ran("install", 50), ran("validate", 14))
	tests := []struct {
		name      string
		events    []pipeline.Event
		rec       *pipeline.Record
		wantWait  time.Duration
		wantShare float64
		wantErr   string
	}{{
		// The VM logs through install's logger, so its boot-complete is an install event.
		name: "one boot: validate waits from taking over install's VM to its boot-complete",
		events: []pipeline.Event{
			logAt("install", 1, startInstall), logAt("install", 5, liveBooted),
			logAt("install", 38, installStart), logAt("install", 41, installDone),
			logAt("install", 42, awaiting), logAt("install", 44, awaiting),
			logAt("validate", 50, takeover), logAt("install", 51, awaiting),
			logAt("install", 53, handedFacts), logAt("install", 54, handedBooted),
		},
		rec:      both,
		wantWait: 44 * time.Second, wantShare: 44.0 / 64,
	}, {
		name: "one boot, the taken-over VM's messages logged by validate",
		events: []pipeline.Event{
			logAt("install", 1, startInstall), logAt("install", 41, installDone),
			logAt("validate", 50, takeover), logAt("validate", 53, handedFacts), logAt("validate", 55, handedBooted),
		},
		rec:      both,
		wantWait: 45 * time.Second, wantShare: 45.0 / 64,
	}, {
		name: "another stage's final message does not end a VM the stage booted",
		events: []pipeline.Event{
			logAt("install", 1, startInstall), logAt("install", 41, installDone),
			logAt("validate", 50, startValidate), logAt("seal", 52, handedBooted), logAt("validate", 58, bootDone),
		},
		rec:      both,
		wantWait: 48 * time.Second, wantShare: 48.0 / 64,
	}, {
		name: "one VM per stage, waits up to each final message",
		events: []pipeline.Event{
			logAt("install", 1, startInstall), logAt("install", 5, liveBooted),
			logAt("install", 38, installStart), logAt("install", 41, installDone),
			logAt("validate", 52, startValidate), logAt("validate", 61, bootDone),
		},
		rec:      both,
		wantWait: 49 * time.Second, wantShare: 49.0 / 64,
	}, {
		name: "a failed final report ends the wait; other stages' VMs do not count",
		events: []pipeline.Event{
			logAt("live-iso", 0, "starting VM name=other accel=tcg console=x"),
			logAt("install", 1, startInstall), logAt("install", 21, installFailed),
			logAt("validate", 52, startValidate), logAt("validate", 56, bootDone),
		},
		rec:      both,
		wantWait: 24 * time.Second, wantShare: 24.0 / 64,
	}, {
		name: "two VMs in one stage add up",
		events: []pipeline.Event{
			logAt("install", 0, startInstall), logAt("install", 10, installDone),
			logAt("install", 20, startInstall), logAt("install", 25, installDone),
			logAt("validate", 50, startValidate), logAt("validate", 54, bootDone),
		},
		rec:      both,
		wantWait: 19 * time.Second, wantShare: 19.0 / 64,
	}, {
		name:    "a VM with no final message",
		events:  []pipeline.Event{logAt("install", 1, startInstall), logAt("install", 38, installStart), logAt("validate", 52, startValidate), logAt("validate", 61, bootDone)},
		rec:     both,
		wantErr: "a VM of stage install logged no final guest message",
	}, {
		name:    "a stage that started no VM",
		events:  []pipeline.Event{logAt("install", 1, startInstall), logAt("install", 41, installDone)},
		rec:     both,
		wantErr: "stage validate logged neither a VM start nor taking over install's VM",
	}, {
		name:    "a cached stage measures nothing",
		events:  []pipeline.Event{logAt("install", 1, startInstall), logAt("install", 41, installDone)},
		rec:     record(ran("install", 50), pipeline.StageRecord{Name: "validate", Cache: "hit"}),
		wantErr: "stage validate was a cache hit",
	}, {
		name:    "a stage missing from the record",
		rec:     record(ran("install", 50)),
		wantErr: "run.json has no stage validate",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			share, wait, err := guestWaitShare(tt.events, tt.rec, "install", "validate")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if wait != tt.wantWait || math.Abs(share-tt.wantShare) > 1e-9 {
				t.Fatalf("wait %s share %.6f, want %s %.6f", wait, share, tt.wantWait, tt.wantShare)
			}
		})
	}
}

// parseEvents reads back what the CLI's JSON renderer writes.
func TestParseEventsReadsTheJSONRenderer(t *testing.T) {
	want := []pipeline.Event{
		{Time: t0, Kind: pipeline.EventStageStart, Stage: "install"},
		logAt("install", 3, "line with\nnewline and \x1e separator"),
		{Time: t0.Add(time.Minute), Kind: pipeline.EventStageDone, Stage: "install", Cache: "miss", Duration: time.Minute},
	}
	var buf bytes.Buffer
	seq := progress.NewJSONSeq(&buf)
	for _, e := range want {
		seq.Emit(e)
	}
	got, err := parseEvents(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Message != want[i].Message || got[i].Duration != want[i].Duration || got[i].Kind != want[i].Kind {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseEvents([]byte("\x1e{not json}\n")); err == nil {
		t.Error("a broken record parsed")
	}
}

// The one-boot build starts one VM for install and validate; the build before it, two.
func TestVMStarts(t *testing.T) {
	oneBoot := []pipeline.Event{
		logAt("install", 1, startInstall), logAt("install", 41, installDone),
		logAt("validate", 50, takeover), logAt("validate", 54, handedBooted),
		logAt("seal", 60, "starting VM name=seal accel=tcg console=x"),
	}
	twoBoots := []pipeline.Event{
		logAt("install", 1, startInstall), logAt("install", 41, installDone),
		logAt("validate", 52, startValidate), logAt("validate", 61, bootDone),
	}
	if n := vmStarts(oneBoot, "install", "validate"); n != 1 {
		t.Errorf("one-boot build: %d VM starts, want 1", n)
	}
	if n := vmStarts(twoBoots, "install", "validate"); n != 2 {
		t.Errorf("two-boot build: %d VM starts, want 2", n)
	}
}
