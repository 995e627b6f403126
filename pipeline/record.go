package pipeline

import (
	"encoding/json"
	"strconv"
	"time"
)

// Record is run.json: what a build did, for people, depots and "why did this change?".
type Record struct {
	Blueprint string        `json:"blueprint"`
	Status    string        `json:"status"` // succeeded, failed, interrupted
	Error     string        `json:"error,omitempty"`
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	CacheDir  string        `json:"cacheDir"`
	Stages    []StageRecord `json:"stages"`
}

// StageRecord is one stage's line in run.json.
type StageRecord struct {
	Name      string            `json:"name"`
	Key       string            `json:"key"`
	Cache     string            `json:"cache"` // hit or miss
	Duration  Duration          `json:"duration"`
	Artifacts []Artifact        `json:"artifacts,omitempty"`
	Tools     map[string]string `json:"tools,omitempty"`
	Error     string            `json:"error,omitempty"`
	LogPath   string            `json:"log,omitempty"`
	KeptDir   string            `json:"keptDir,omitempty"`
	dir       string
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

func (r *Record) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// ReadRecord loads a run.json.
func ReadRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
