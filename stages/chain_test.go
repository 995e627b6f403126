package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/stages/resolve"
	pl "github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

// TestStageISOFromMachineOSImages chains the real resolve and live-iso stages over a release
// whose live ISO is only in machine-os-images (no coreos-bootimages stream): resolve extracts
// it, and live-iso embeds the config into exactly that ISO.
func TestStageISOFromMachineOSImages(t *testing.T) {
	iso := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	reg := registry.StartT(t, registry.Options{})
	rel, err := pl.Generate(context.Background(), reg.Addr(), pl.Options{Size: pl.Tiny, Components: 8,
		ISO: pl.ISO{Path: iso, NoBootImages: true}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	resolveOut := t.TempDir()
	rs := resolve.New(resolve.Options{Release: rel.Tag, Registry: registries.Config{Insecure: []string{reg.Addr()}}})
	if err := rs.Run(context.Background(), &pipeline.Env{Out: resolveOut, Scratch: t.TempDir(), Log: log}); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	l, err := lockfile.ReadLock(filepath.Join(resolveOut, lockfile.File))
	if err != nil {
		t.Fatal(err)
	}
	if l.ISO == nil || !l.ISO.InImage() || l.ISO.SHA256 != coreisotest.SHA256(t, iso) || l.ISO.Path != resolve.ISOPath {
		t.Fatalf("lock iso = %+v, want the machine-os-images ISO extracted with sha256 %s", l.ISO, coreisotest.SHA256(t, iso))
	}

	renderDir := t.TempDir()
	cfg := chainConfig("machine-os-images")
	if err := os.WriteFile(filepath.Join(renderDir, "config.ign"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	chainRecord(t, renderDir, handoff.Render{Target: "openshift",
		Configs: map[string]handoff.IgnitionConfig{handoff.ConfigNode: {Path: "config.ign", Version: "3.2.0"}}})
	out := t.TempDir()
	s := liveiso.New(liveiso.StageOptions{ISOFromResolve: true})
	if err := s.Run(context.Background(), &pipeline.Env{Out: out, Log: log,
		Inputs: map[string]string{handoff.StageRender: renderDir, handoff.StageResolve: resolveOut}}); err != nil {
		t.Fatalf("live-iso: %v", err)
	}
	got, err := coreiso.ShowIgnition(filepath.Join(out, liveiso.OutputISO))
	if err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("show = %q, %v", got, err)
	}
	// Patched in place, so the result is the base ISO's size: the base was that ISO.
	var rep coreiso.Report
	raw, _ := os.ReadFile(filepath.Join(out, liveiso.ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Strategy != coreiso.StrategyPatch {
		t.Fatalf("report %s, %v", raw, err)
	}
	base, _ := os.Stat(iso)
	custom, _ := os.Stat(filepath.Join(out, liveiso.OutputISO))
	if base.Size() != custom.Size() {
		t.Fatalf("customized ISO is %d bytes, the base %d", custom.Size(), base.Size())
	}
}

func chainConfig(tag string) []byte {
	return []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/tag","contents":{"source":"data:,` + tag + `"}}]}}`)
}

// chainRecord writes a stage's output record into dir, as the engine would.
func chainRecord(t *testing.T, dir string, rec any) {
	t.Helper()
	if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
		t.Fatal(err)
	}
}
