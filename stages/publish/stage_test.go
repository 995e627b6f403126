package publish

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/ociseed"
	"github.com/snofactory/snofactory/seeds/seed"
	"github.com/snofactory/snofactory/seeds/seed/seedtest"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/test/registry"
)

// The stage pushes the sealed seed to a real registry and into an OCI layout, with the
// validation report and the run record as referrers, and says where it went.
func TestPublish(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	sealDir, validateDir, runDir, out := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	m := seedtest.Write(t, filepath.Join(sealDir, "seed"), seedtest.Options{RawSize: 3 << 20, Formats: []string{seed.FormatQCOW2}})
	write := func(dir string, rec any) {
		if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(sealDir, handoff.Seal{Dir: "seed", Manifest: "seed/" + seed.ManifestFile})
	os.WriteFile(filepath.Join(validateDir, "validation.json"), []byte(`{"summary":{"passed":9}}`), 0o644)
	os.WriteFile(filepath.Join(validateDir, "validation.junit.xml"), []byte(`<testsuites/>`), 0o644)
	write(validateDir, handoff.Validate{Report: "validation.json", JUnit: "validation.junit.xml", Passed: 9})
	os.WriteFile(filepath.Join(runDir, pipeline.RecordFile), []byte(`{"status":"running"}`), 0o644)

	ref := reg.Ref("seeds/" + m.Name + ":1.0")
	layout := filepath.Join(t.TempDir(), "layout")
	env := &pipeline.Env{Out: out, RunDir: runDir, Log: slog.New(slog.DiscardHandler),
		Inputs: map[string]string{handoff.StageSeal: sealDir, handoff.StageValidate: validateDir}}
	if err := run(context.Background(), Options{Push: ref, OCILayout: layout, ChunkSize: 1 << 20}, env); err != nil {
		t.Fatal(err)
	}
	var rep Report
	b, _ := os.ReadFile(filepath.Join(out, ReportFile))
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Published) != 2 || rep.Published[0].Digest != rep.Published[1].Digest {
		t.Fatalf("publish.json = %s (%v): want the same artifact in both places", b, err)
	}
	for _, loc := range []string{ref, ociseed.TransportLayout + ":" + layout} {
		got, err := ociseed.Inspect(context.Background(), loc)
		if err != nil || got.Name != m.Name {
			t.Errorf("%s: %+v, %v", loc, got, err)
		}
	}
	for _, at := range []string{ArtifactValidation, ArtifactRunRecord} {
		refs, err := ociseed.Referrers(context.Background(), ref, at)
		if err != nil || len(refs) != 1 {
			t.Errorf("referrers %s: %v, %v", at, refs, err)
		}
	}
	// Nothing to publish is not an error: the report says so with no destination.
	out2 := t.TempDir()
	env.Out = out2
	if err := run(context.Background(), Options{}, env); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(out2, ReportFile))
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Published) != 0 {
		t.Errorf("publish.json without destinations = %s", b)
	}
}
