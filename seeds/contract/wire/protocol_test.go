package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func msg(boot string, seq uint64, phase string, st Status) Message {
	return Message{Version: ProtocolVersion, Boot: boot, Seq: seq, Time: time.Unix(1700000000, 0).UTC(), Phase: phase, Status: st}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := []Message{
		msg("b1", 1, "ignition-files", StatusStart),
		msg("b1", 2, "ignition-files", StatusOK),
		msg("b1", 3, PhaseInstallComplete, StatusOK),
		msg("b2", 1, PhaseBootComplete, StatusOK),
	}
	in[1].Details = map[string]string{"file": "hello\nworld", "file.sha256": "ab"}
	var buf bytes.Buffer
	for _, m := range in {
		if err := Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != len(in) {
		t.Fatalf("want one line per message, got %d lines", n)
	}
	d := NewDecoder(&buf)
	for i, want := range in {
		got, err := d.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got.Seq != want.Seq || got.Phase != want.Phase || got.Status != want.Status || got.Details["file"] != want.Details["file"] {
			t.Fatalf("message %d: got %+v want %+v", i, got, want)
		}
		if got.Final() != (i >= 2) {
			t.Fatalf("message %d: Final()=%v", i, got.Final())
		}
	}
	if _, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestDecoderRejectsBadLines(t *testing.T) {
	good := `{"v":1,"boot":"b","seq":1,"phase":"p","status":"ok"}`
	tests := []struct {
		name, line string
	}{
		{"not json", "garbage"},
		{"old version", `{"v":0,"boot":"b","seq":1,"phase":"p","status":"ok"}`},
		{"no seq", `{"v":1,"boot":"b","phase":"p","status":"ok"}`},
		{"bad status", `{"v":1,"boot":"b","seq":1,"phase":"p","status":"done"}`},
		{"space in phase", `{"v":1,"boot":"b","seq":1,"phase":"a b","status":"ok"}`},
		{"replayed seq", good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each case: a good line, the bad one, then a good line with a higher seq:
			// the bad line is reported and the stream carries on.
			next := `{"v":1,"boot":"b","seq":2,"phase":"q","status":"ok"}`
			d := NewDecoder(strings.NewReader("\x00\x00" + good + "\n" + tt.line + "\n\n" + next + "\n"))
			if _, err := d.Next(); err != nil {
				t.Fatalf("first line: %v", err)
			}
			_, err := d.Next()
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("want ProtocolError, got %v", err)
			}
			m, err := d.Next()
			if err != nil || m.Phase != "q" {
				t.Fatalf("stream did not recover: %+v %v", m, err)
			}
		})
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	if err := Encode(io.Discard, msg("b", 0, "p", StatusOK)); err == nil {
		t.Fatal("seq 0 accepted")
	}
}

// Every install plan is a valid, duplicate-free list of phase names that ends in the
// final phase, so a host following it can tell the end of an install.
func TestInstallPlans(t *testing.T) {
	for name, plan := range map[string][]string{"conformance": InstallPhases(), "openshift": OpenShiftInstallPhases()} {
		seen := map[string]bool{}
		for i, p := range plan {
			if seen[p] {
				t.Errorf("%s: phase %s twice", name, p)
			}
			seen[p] = true
			m := msg("b", uint64(i+1), p, StatusOK)
			if err := m.Validate(); err != nil {
				t.Errorf("%s: phase %q: %v", name, p, err)
			}
			if last := i == len(plan)-1; m.Final() != last {
				t.Errorf("%s: phase %s at %d of %d: Final() = %v", name, p, i+1, len(plan), m.Final())
			}
		}
	}
}
