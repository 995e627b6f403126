package publish

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// Two builds of one blueprint and lock whose stages had the same recipes but other keys
// (an installed disk that is not bit-identical), at other times, make provenance that
// differs in exactly PerBuildProvenanceFields; a changed recipe, input or tool shows.
func TestProvenanceDiffersOnlyInPerBuildFields(t *testing.T) {
	m := &seed.Manifest{Name: "demo", Target: "coreos", BlueprintDigest: digest.Digest("sha256:" + strings.Repeat("b", 64)), LockDigest: digest.Digest("sha256:" + strings.Repeat("c", 64)),
		Tools: map[string]string{"qemu": "8.2"}}
	lock := &lockfile.Lock{SchemaVersion: 1, ISO: &lockfile.LockedISO{Path: "live.iso", SHA256: strings.Repeat("d", 64), From: "blueprint"}}
	rec := func(keySuffix string, recipes ...string) *pipeline.Record {
		r := &pipeline.Record{Started: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}
		if keySuffix == "2" {
			r.Started = r.Started.Add(24 * time.Hour)
		}
		for i, name := range []string{"resolve", "install", "seal"} {
			r.Stages = append(r.Stages, pipeline.StageRecord{Name: name, Recipe: recipes[i], Key: name + keySuffix})
		}
		return r
	}
	statement := func(in provenanceInputs) []byte {
		t.Helper()
		b, err := makeProvenance(in)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := statement(provenanceInputs{Seed: m, Lock: lock, Record: rec("1", "r1", "r2", "r3"), Finished: time.Unix(1, 0)})
	second := statement(provenanceInputs{Seed: m, Lock: lock, Record: rec("2", "r1", "r2", "r3"), Finished: time.Unix(2, 0)})
	diff, err := seed.DiffJSON(first, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"runDetails.byproducts[0].digest.sha256", "runDetails.byproducts[1].digest.sha256", "runDetails.byproducts[2].digest.sha256",
		"runDetails.metadata.finishedOn", "runDetails.metadata.startedOn"}
	if !slices.Equal(diff, want) {
		t.Errorf("two builds differ in %v, want %v", diff, want)
	}
	if diff, err := seed.DiffJSON(first, second, PerBuildProvenanceFields); err != nil || len(diff) != 0 {
		t.Errorf("outside the per-build fields: %v, %v", diff, err)
	}

	otherTools := *m
	otherTools.Tools = map[string]string{"qemu": "9.0"}
	otherLock := *lock
	otherLock.ISO = &lockfile.LockedISO{Path: "live.iso", SHA256: strings.Repeat("e", 64), From: "blueprint"}
	for _, tc := range []struct {
		name string
		in   provenanceInputs
		want string
	}{
		{"a recipe", provenanceInputs{Seed: m, Lock: lock, Record: rec("2", "r1", "other", "r3")}, "buildDefinition.internalParameters.stages[1].recipe"},
		{"the ISO", provenanceInputs{Seed: m, Lock: &otherLock, Record: rec("2", "r1", "r2", "r3")}, "buildDefinition.resolvedDependencies[1].digest.sha256"},
		{"a tool", provenanceInputs{Seed: &otherTools, Lock: lock, Record: rec("2", "r1", "r2", "r3")}, "runDetails.builder.version.qemu"},
	} {
		diff, err := seed.DiffJSON(first, statement(tc.in), PerBuildProvenanceFields)
		if err != nil || !slices.Contains(diff, tc.want) {
			t.Errorf("another %s: differences %v (%v), want %s among them", tc.name, diff, err, tc.want)
		}
	}
}
