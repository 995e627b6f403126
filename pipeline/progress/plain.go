package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// Plain writes one timestamped line per event, prefixed with [blueprint/stage]. Progress
// events are throttled per stage so logs stay readable.
type Plain struct {
	mu       sync.Mutex
	w        io.Writer
	every    time.Duration
	lastProg map[string]time.Time
	rates    rates
}

// NewPlain returns a Plain renderer writing to w.
func NewPlain(w io.Writer) *Plain {
	return &Plain{w: w, every: 5 * time.Second, lastProg: map[string]time.Time{}, rates: rates{}}
}

// Emit implements pipeline.Sink.
func (p *Plain) Emit(e pipeline.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := describe(e, p.rates)
	if e.Kind == pipeline.EventProgress {
		k := e.Stage + "/" + e.Message
		if last, ok := p.lastProg[k]; ok && e.Time.Sub(last) < p.every && e.Done != e.Total {
			return
		}
		p.lastProg[k] = e.Time
	}
	if line == "" {
		return
	}
	fmt.Fprintf(p.w, "%s [%s] %s\n", e.Time.UTC().Format(time.RFC3339), prefix(e), line)
}

func prefix(e pipeline.Event) string {
	if e.Stage == "" {
		return e.Blueprint
	}
	return e.Blueprint + "/" + e.Stage
}

// describe is the human text of an event, shared by the plain and TTY renderers.
func describe(e pipeline.Event, r rates) string {
	switch e.Kind {
	case pipeline.EventBuildStart:
		return "build started: " + e.Message
	case pipeline.EventBuildDone:
		if e.Error != "" {
			return fmt.Sprintf("build %s after %s", e.Message, round(e.Duration))
		}
		return fmt.Sprintf("build %s in %s", e.Message, round(e.Duration))
	case pipeline.EventStageStart:
		if e.Message != "" {
			return "running (" + e.Message + ")"
		}
		return "running"
	case pipeline.EventStageHit:
		return "cached (key " + short(e.Key) + ")"
	case pipeline.EventStageDone:
		return fmt.Sprintf("done in %s (key %s)", round(e.Duration), short(e.Key))
	case pipeline.EventStageFail:
		return fmt.Sprintf("FAILED after %s: %s", round(e.Duration), e.Error)
	case pipeline.EventLog:
		if e.Level != "" && e.Level != "info" {
			return e.Level + ": " + e.Message
		}
		return e.Message
	case pipeline.EventProgress:
		return progressText(e, r)
	}
	return e.Message
}

func progressText(e pipeline.Event, r rates) string {
	s := e.Message + ": " + amount(e.Done, e.Unit)
	if e.Total > 0 {
		s += " / " + amount(e.Total, e.Unit) + fmt.Sprintf(" (%d%%)", e.Done*100/e.Total)
	}
	rate, eta := r.observe(e)
	if rate > 0 {
		s += ", " + amount(int64(rate), e.Unit) + "/s"
		if eta > 0 {
			s += ", ETA " + round(eta)
		}
	}
	return s
}

func short(key string) string {
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func round(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func amount(n int64, unit string) string {
	if unit != "bytes" {
		if unit == "" {
			return fmt.Sprint(n)
		}
		return fmt.Sprintf("%d %s", n, unit)
	}
	const k = 1024
	switch {
	case n >= k*k*k:
		return fmt.Sprintf("%.2f GiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	}
	return fmt.Sprintf("%d B", n)
}

// rates derives throughput and ETA from successive progress events of one counter, so stages
// only report counts and every renderer computes speed the same way.
type rates map[string]*rateState

type rateState struct {
	start     time.Time
	startDone int64
}

func (r rates) observe(e pipeline.Event) (perSecond float64, eta time.Duration) {
	k := e.Stage + "/" + e.Message
	st, ok := r[k]
	if !ok || e.Done < st.startDone {
		r[k] = &rateState{start: e.Time, startDone: e.Done}
		return 0, 0
	}
	el := e.Time.Sub(st.start).Seconds()
	if el < 0.5 {
		return 0, 0
	}
	perSecond = float64(e.Done-st.startDone) / el
	if perSecond > 0 && e.Total > e.Done {
		eta = time.Duration(float64(e.Total-e.Done) / perSecond * float64(time.Second))
	}
	return perSecond, eta
}
