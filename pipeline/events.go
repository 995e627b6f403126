package pipeline

import (
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
)

// EventKind says what an Event reports.
type EventKind string

const (
	EventBuildStart EventKind = "build-start"
	EventBuildDone  EventKind = "build-done"
	EventStageStart EventKind = "stage-start"
	EventStageDone  EventKind = "stage-done"
	EventStageHit   EventKind = "stage-cached"
	EventStageFail  EventKind = "stage-failed"
	EventProgress   EventKind = "progress"
	EventLog        EventKind = "log"
)

// Event is one entry of the build's event stream. The same stream feeds the TTY, plain and
// JSON renderers, so anything a user can see is also available to machines.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      EventKind `json:"kind"`
	Blueprint string    `json:"blueprint,omitempty"`
	Stage     string    `json:"stage,omitempty"`
	Message   string    `json:"message,omitempty"`
	Level     string    `json:"level,omitempty"`
	// Done and Total count progress in Unit ("bytes", "images", ...).
	Done  int64  `json:"done,omitempty"`
	Total int64  `json:"total,omitempty"`
	Unit  string `json:"unit,omitempty"`
	// Key and Cache describe a finished stage.
	Key      string        `json:"key,omitempty"`
	Cache    string        `json:"cache,omitempty"`
	Duration time.Duration `json:"durationNs,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// Sink receives events. Implementations must be safe for concurrent use.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// emitter stamps events with time and blueprint before handing them to the sink.
type emitter struct {
	mu        sync.Mutex
	sink      Sink
	blueprint string
	clock     clock.Clock
}

func (e *emitter) emit(ev Event) {
	if e == nil || e.sink == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Time.IsZero() {
		ev.Time = e.clock.Now()
	}
	if ev.Blueprint == "" {
		ev.Blueprint = e.blueprint
	}
	e.sink.Emit(ev)
}
