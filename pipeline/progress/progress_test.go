package progress

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewPlain(&buf)
	p.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventStageStart, Blueprint: "demo", Stage: "render", Message: "never built with this cache"})
	p.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventProgress, Blueprint: "demo", Stage: "precache", Message: "blobs", Done: 0, Total: 100 << 20, Unit: "bytes"})
	// Throttled: within 5 s of the previous progress line.
	p.Emit(pipeline.Event{Time: t0.Add(time.Second), Kind: pipeline.EventProgress, Blueprint: "demo", Stage: "precache", Message: "blobs", Done: 10 << 20, Total: 100 << 20, Unit: "bytes"})
	p.Emit(pipeline.Event{Time: t0.Add(10 * time.Second), Kind: pipeline.EventProgress, Blueprint: "demo", Stage: "precache", Message: "blobs", Done: 50 << 20, Total: 100 << 20, Unit: "bytes"})
	p.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventStageHit, Blueprint: "demo", Stage: "resolve", Key: "0123456789abcdef"})
	want := []string{
		"2026-11-22T10:00:00Z [demo/render] running (never built with this cache)",
		"2026-11-22T10:00:00Z [demo/precache] blobs: 0 B / 100.0 MiB (0%)",
		"2026-11-22T10:00:10Z [demo/precache] blobs: 50.0 MiB / 100.0 MiB (50%), 5.0 MiB/s, ETA 10s",
		"2026-11-22T10:00:00Z [demo/resolve] cached (key 0123456789ab)",
	}
	got := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJSONSeqIsRFC7464(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSONSeq(&buf)
	j.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventStageDone, Blueprint: "demo", Stage: "render", Key: "k", Cache: "miss", Duration: 1500 * time.Millisecond})
	j.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventLog, Blueprint: "demo", Stage: "render", Message: "a\x1e line\nwith newline"})
	recs := bytes.Split(buf.Bytes(), []byte{0x1e})
	if len(recs) != 3 || len(recs[0]) != 0 {
		t.Fatalf("want 2 records each starting with RS, got %q", buf.String())
	}
	for _, r := range recs[1:] {
		if r[len(r)-1] != '\n' || bytes.Count(r, []byte{'\n'}) != 1 {
			t.Fatalf("record not one LF-terminated line: %q", r)
		}
		var e pipeline.Event
		if err := json.Unmarshal(r, &e); err != nil {
			t.Fatal(err)
		}
	}
	var e pipeline.Event
	json.Unmarshal(recs[1], &e)
	if e.Kind != pipeline.EventStageDone || e.Cache != "miss" || e.Duration != 1500*time.Millisecond {
		t.Fatalf("round trip: %+v", e)
	}
}

func TestTTYRendersWithoutBlocking(t *testing.T) {
	var buf bytes.Buffer
	tty := NewTTY(&buf)
	tty.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventStageStart, Blueprint: "demo", Stage: "precache"})
	for i := int64(0); i <= 10; i++ {
		tty.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventProgress, Blueprint: "demo", Stage: "precache", Message: "blobs", Done: i * 10, Total: 100, Unit: "bytes"})
	}
	tty.Emit(pipeline.Event{Time: t0, Kind: pipeline.EventStageDone, Blueprint: "demo", Stage: "precache", Key: "abc"})
	tty.Close() // a renderer that blocks hangs here, until the test's own timeout
	if !strings.Contains(buf.String(), "[demo/precache] done in") {
		t.Fatalf("missing stage line in %q", buf.String())
	}
}
