package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// RecordFile is the run record's name in a build's output directory.
const RecordFile = "run.json"

// The statuses of a run record. A build writes "running" when it starts and rewrites the
// record as each stage finishes, so a build killed at any point leaves a record that says it
// never finished and how far it got, never the previous build's outcome.
const (
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Record is run.json: what a build did, for people, depots and "why did this change?".
type Record struct {
	Blueprint string    `json:"blueprint"`
	Status    string    `json:"status"` // running, succeeded, failed, interrupted
	Error     string    `json:"error,omitempty"`
	Started   time.Time `json:"started"`
	// Finished is zero (and absent) while the build runs.
	Finished time.Time     `json:"finished,omitzero"`
	CacheDir string        `json:"cacheDir"`
	Stages   []StageRecord `json:"stages"`
}

// StageRecord is one stage's line in run.json.
type StageRecord struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Recipe is what the stage was asked to do (KeyInputs.Recipe): the same in every build
	// of one blueprint and lock, where Key also names the upstream bytes it consumed.
	Recipe string `json:"recipe,omitempty"`
	Cache  string `json:"cache"` // hit or miss
	// Started is when the stage began; Duration includes Waited, the time it waited for
	// its resources (a depot's VM slots).
	Started   time.Time         `json:"started,omitzero"`
	Duration  Duration          `json:"duration"`
	Waited    Duration          `json:"waited,omitempty"`
	Artifacts []Artifact        `json:"artifacts,omitempty"`
	Tools     map[string]string `json:"tools,omitempty"`
	// Summary is the stage's own account of its result (e.g. validation's check counts).
	Summary json.RawMessage `json:"summary,omitempty"`
	Error   string          `json:"error,omitempty"`
	LogPath string          `json:"log,omitempty"`
	KeptDir string          `json:"keptDir,omitempty"`
	// Session is the live session (a factory VM) the stage ran in, when it ran in one:
	// stages naming the same session shared one boot.
	Session string `json:"session,omitempty"`
	dir     string
}

// Duration marshals as seconds with millisecond precision, which reads well in JSON.
type Duration time.Duration

// MarshalJSON writes the duration in seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(d).Seconds(), 'f', 3, 64)), nil
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// write replaces the record at path atomically (WriteFileAtomic): a reader, or a build killed
// mid-write, sees the old record or the new one.
func (r *Record) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}
	return nil
}

// startRecord creates the output directory, removes the temporary files of record writes a
// killed build left behind, and writes rec (running) as the directory's record.
func startRecord(outDir string, rec *Record) error {
	if err := os.MkdirAll(filepath.Join(outDir, "logs"), 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	// The pattern of WriteFileAtomic's temporary files for RecordFile.
	stale, err := filepath.Glob(filepath.Join(outDir, ".tmp-"+RecordFile+"-*"))
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing a stale run record: %w", err)
		}
	}
	return rec.write(filepath.Join(outDir, RecordFile))
}

// ReadRecord loads a run.json.
func ReadRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
