package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
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

// Grouping chunks into blobs: one chunk a blob sends exactly the chunks the old disk
// lacks; larger groups send whole groups around each of them; an unchanged disk sends
// nothing whatever the grouping.
func TestGroupingTradeoff(t *testing.T) {
	chunk := func(i int) diskpack.Chunk {
		id := digest.FromString(fmt.Sprint("raw", i))
		return diskpack.Chunk{Offset: int64(i) << 20, Size: 1 << 20, ID: id, Blob: digest.FromString(fmt.Sprint("stored", i)), Stored: 1000}
	}
	disk := func(ids ...int) *diskpack.Index {
		x := &diskpack.Index{Size: 1 << 40}
		for _, i := range ids {
			x.Chunks = append(x.Chunks, chunk(i))
		}
		return x
	}
	var old, next []int
	for i := range 64 {
		old = append(old, i)
		if i == 30 {
			next = append(next, 1000)
		} else {
			next = append(next, i)
		}
	}
	got := groupingTradeoff(disk(old...), disk(next...), []int{1, 4})
	if got[0] != (grouping{k: 1, blobs: 64, sent: 1.0 / 64}) {
		t.Errorf("one chunk a blob: %+v", got[0])
	}
	if g := got[1]; g.blobs >= 32 || g.blobs < 2 || g.sent <= 1.0/64 || g.sent > 0.5 {
		t.Errorf("four chunks a blob: %+v", g)
	}
	for _, g := range groupingTradeoff(disk(old...), disk(old...), []int{1, 2, 8}) {
		if g.sent != 0 {
			t.Errorf("an unchanged disk, %d chunks a blob, sends %.2f", g.k, g.sent)
		}
	}
}
