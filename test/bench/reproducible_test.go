package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
)

// Stage keys are compared by stage name, whatever order the records list them in, and the
// outputs whose digests differ are named.
func TestDifferingStageKeys(t *testing.T) {
	write := func(stages ...pipeline.StageRecord) string {
		p := filepath.Join(t.TempDir(), pipeline.RecordFile)
		b, _ := json.Marshal(pipeline.Record{Stages: stages})
		os.WriteFile(p, b, 0o644)
		return p
	}
	a := write(pipeline.StageRecord{Name: "resolve", Key: "k1", Artifacts: []pipeline.Artifact{{Path: "lock.json", SHA256: "a"}}},
		pipeline.StageRecord{Name: "seal", Key: "k2"})
	for _, tc := range []struct {
		name string
		b    string
		want string
	}{
		{"same", write(pipeline.StageRecord{Name: "seal", Key: "k2"}, pipeline.StageRecord{Name: "resolve", Key: "k1", Artifacts: []pipeline.Artifact{{Path: "lock.json", SHA256: "a"}}}), "none"},
		{"one differs", write(pipeline.StageRecord{Name: "resolve", Key: "k1"}, pipeline.StageRecord{Name: "seal", Key: "other"}), "seal"},
		{"one missing", write(pipeline.StageRecord{Name: "seal", Key: "k2"}), "resolve"},
		{"an output differs", write(pipeline.StageRecord{Name: "resolve", Key: "k1", Artifacts: []pipeline.Artifact{{Path: "lock.json", SHA256: "b"}}},
			pipeline.StageRecord{Name: "seal", Key: "other"}), "seal; outputs that differ (keys chain on those that are not reports): resolve/lock.json"},
	} {
		got, err := differingStageKeys(a, tc.b)
		if err != nil || got.String() != tc.want || got.stages != 2 {
			t.Errorf("%s: %+v (%q), %v; want %q", tc.name, got, got.String(), err, tc.want)
		}
	}
	if _, err := differingStageKeys(a, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing record was compared")
	}
}
