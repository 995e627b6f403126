package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Stage is one step of a build. Stage packages construct it with typed options and return it;
// the engine treats Options as opaque data that only feeds the cache key.
type Stage struct {
	// Name is unique within a graph, e.g. "render".
	Name string
	// Version is bumped whenever the stage's output changes for the same inputs, which
	// invalidates every cache entry it made.
	Version string
	// Options is exactly what the stage reads from the blueprint; its canonical JSON is part
	// of the key. It must not hold secrets: declare those in Secrets.
	Options any
	// Deps names the upstream stages whose outputs this stage consumes.
	Deps []string
	// Files maps a stable label (e.g. "butane/10-motd.bu") to a file or directory the stage
	// reads; their content digests are part of the key, their host paths are not, so moving a
	// checkout does not invalidate the cache.
	Files map[string]string
	// Secrets names the secrets the stage reads (see Secrets). They enter the key only as an
	// HMAC under a per-cache random key.
	Secrets []string
	// Uncached stages run every time (e.g. a push whose effect lives outside the cache);
	// they still get a key so plan can show them.
	Uncached bool
	// Unavailable, when set, is why this version cannot run the stage (e.g. "not implemented
	// in this version"). Plan shows the stage as "unavailable" with this reason, and a build
	// that selects it is refused before anything runs. Such a stage needs no Run.
	Unavailable string
	// Reports are output files (slash-separated, under Out) that tell how the stage ran
	// (durations, bytes fetched, retries) rather than what it made. They are kept and
	// recorded like any output, but left out of the digest downstream keys chain on, so two
	// runs that made the same thing key the stages after them alike. No stage may read
	// another's reports.
	Reports []string
	// Resources are what a run of the stage holds (a factory VM); BuildOptions.Slots
	// hands them out. Not part of the key.
	Resources Resources
	// Session is the kind of live session (Session) the stage can start, hand on and take
	// over from an earlier stage of the same build: "factory-vm" for the stages that boot
	// the installed disk. A stage that takes one holds no resources of its own: the
	// session brings those of the stage that started it.
	Session string
	// MaxAge, when set, is how long the stage's outputs may be used after they were made
	// (outputs holding short-lived credentials): an older cache entry is run again, and
	// plan says why. Not part of the key.
	MaxAge time.Duration
	// Run does the work. It writes outputs only below env.Out.
	Run func(ctx context.Context, env *Env) error
}

// Env is what a running stage gets from the engine.
type Env struct {
	// Out is the staging directory for this stage's outputs; it becomes the cache entry.
	Out string
	// Scratch is a private, empty directory for this run only (removed afterwards, and after a
	// crash by the next run): put files holding secrets there, never in the system temp dir.
	Scratch string
	// Inputs maps each name in Stage.Deps to that stage's (read-only) output directory.
	// Stages read an upstream's typed record through ReadOutput rather than naming its files.
	Inputs map[string]string
	// Shared returns a depot-wide directory for data that outlives entries and is shared by
	// every build using this cache (e.g. a blob store). Writers must stage and rename.
	Shared func(name string) (string, error)
	// Secrets gives access to secret values; never log or cache them.
	Secrets SecretSource
	// Log writes to the stage's log file and the event stream.
	Log *slog.Logger
	// LogPath is the full log file of this stage, for error messages.
	LogPath string
	// RunDir is the build's output directory, for what belongs to this run rather than to
	// the cache entry: VM consoles, gather bundles of a failed stage.
	RunDir string
	// KeepOnError is the build's --keep-on-error: a stage that fails keeps what it would
	// otherwise delete (disks, consoles) for inspection.
	KeepOnError bool
	// Tools records the external tools (and versions) the stage used, for run.json.
	tools    map[string]string
	summary  json.RawMessage
	events   *emitter
	stage    string
	cleanups Cleanups
	// sessions are the build's; sessionKind is Stage.Session; session is the one this
	// stage started or took, handOn the one it hands on.
	sessions    *sessions
	sessionKind string
	session     *Session
	handOn      *Session
}

// UseTool records that the stage used an external tool at a version, for the run record.
func (e *Env) UseTool(name, version string) {
	if e.tools != nil {
		e.tools[name] = version
	}
}

// Summarize records v (encoded as JSON) as the stage's summary in run.json; a cache hit
// shows the summary of the run that made the entry. The last call wins.
func (e *Env) Summarize(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("stage %s: encoding its summary: %w", e.stage, err)
	}
	e.summary = b
	return nil
}

// Progress reports byte- or item-counted progress of the stage; total may be 0 if unknown.
func (e *Env) Progress(what string, done, total int64, unit string) {
	if e.events != nil {
		e.events.emit(Event{Kind: EventProgress, Stage: e.stage, Message: what, Done: done, Total: total, Unit: unit})
	}
}
