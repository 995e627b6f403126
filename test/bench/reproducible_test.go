package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
)

// Stage recipes and keys are compared by stage name, whatever order the records list them
// in, and the outputs whose digests differ are named.
func TestDifferingStageKeys(t *testing.T) {
	write := func(stages ...pipeline.StageRecord) string {
		p := filepath.Join(t.TempDir(), pipeline.RecordFile)
		b, _ := json.Marshal(pipeline.Record{Stages: stages})
		os.WriteFile(p, b, 0o644)
		return p
	}
	resolve := pipeline.StageRecord{Name: "resolve", Key: "k1", Recipe: "r1", Artifacts: []pipeline.Artifact{{Path: "lock.json", SHA256: "a"}}}
	seal := pipeline.StageRecord{Name: "seal", Key: "k2", Recipe: "r2"}
	a := write(resolve, seal)
	otherKey := seal
	otherKey.Key = "other"
	otherRecipe := otherKey
	otherRecipe.Recipe = "r3"
	otherLock := resolve
	otherLock.Artifacts = []pipeline.Artifact{{Path: "lock.json", SHA256: "b"}}
	const keysOnly = "stages whose recipes differ: none; whose keys differ (recorded per-build, as byproducts): "
	for _, tc := range []struct {
		name    string
		b       string
		want    string
		recipes int
	}{
		{"same", write(seal, resolve), keysOnly + "none", 0},
		{"a key differs", write(resolve, otherKey), keysOnly + "seal", 0},
		{"a recipe differs", write(resolve, otherRecipe), "stages whose recipes differ: seal; whose keys differ (recorded per-build, as byproducts): seal", 1},
		{"one missing", write(seal), "stages whose recipes differ: resolve; whose keys differ (recorded per-build, as byproducts): resolve", 1},
		{"an output differs", write(otherLock, otherKey), keysOnly + "seal; outputs that differ (keys chain on those that are not reports): resolve/lock.json", 0},
	} {
		got, err := differingStageKeys(a, tc.b)
		if err != nil || got.String() != tc.want || got.stages != 2 || len(got.recipes) != tc.recipes {
			t.Errorf("%s: %+v (%q), %v; want %q", tc.name, got, got.String(), err, tc.want)
		}
	}
	if _, err := differingStageKeys(a, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing record was compared")
	}
}
