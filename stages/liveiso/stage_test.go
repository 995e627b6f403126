package liveiso

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
)

func TestStage(t *testing.T) {
	iso := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	renderDir := t.TempDir()
	cfg := testConfig("stage")
	if err := os.WriteFile(filepath.Join(renderDir, "config.ign"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, renderDir, handoff.Render{Target: "coreos",
		Configs: map[string]handoff.IgnitionConfig{handoff.ConfigNode: {Path: "config.ign", Version: "3.3.0", Secret: true}}})
	keyfile := filepath.Join(t.TempDir(), "eth0.nmconnection")
	if err := os.WriteFile(keyfile, []byte("[connection]\nid=eth0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New(StageOptions{ISOPath: iso, KargsAppend: []string{"snofactory.stage=1"},
		NetworkKeyfiles: map[string]string{"eth0.nmconnection": keyfile}})
	if s.Name != Name || len(s.Deps) != 1 || s.Deps[0] != "render" || s.Files["live.iso"] != iso || s.Files["network/eth0.nmconnection"] != keyfile {
		t.Fatalf("stage = %+v", s)
	}
	// the key must not depend on host paths
	if b, _ := json.Marshal(s.Options); bytes.Contains(b, []byte(iso)) || bytes.Contains(b, []byte(keyfile)) {
		t.Fatalf("options JSON holds host paths: %s", b)
	}
	out := t.TempDir()
	env := &pipeline.Env{Out: out, Inputs: map[string]string{"render": renderDir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := s.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	got, err := coreiso.ShowIgnition(filepath.Join(out, OutputISO))
	if err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("show = %q, %v", got, err)
	}
	if st, _ := os.Stat(filepath.Join(out, OutputISO)); st.Mode().Perm() != 0o600 {
		t.Errorf("an ISO holding a secret config has mode %v", st.Mode().Perm())
	}
	var rep coreiso.Report
	raw, _ := os.ReadFile(filepath.Join(out, ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Strategy != coreiso.StrategyPatch || rep.Output != OutputISO || rep.NetworkFiles != 1 {
		t.Fatalf("report %s, %v", raw, err)
	}
	// a render output without the named config is a clear error
	s = New(StageOptions{ISOPath: iso, Config: handoff.ConfigWorker})
	if err := s.Run(context.Background(), &pipeline.Env{Out: t.TempDir(), Inputs: map[string]string{"render": renderDir}, Log: env.Log}); err == nil {
		t.Fatal("missing config accepted")
	}
}

// TestStageISOFromImageLock: a lock that pins the ISO inside a component image (image://)
// makes the stage read the file the upstream stage extracted, once its sha256 matches.
func TestStageISOFromImageLock(t *testing.T) {
	iso := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	isoSum := coreisotest.SHA256(t, iso)
	renderDir := t.TempDir()
	cfg := testConfig("image-lock")
	if err := os.WriteFile(filepath.Join(renderDir, "config.ign"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, renderDir, handoff.Render{Target: "openshift",
		Configs: map[string]handoff.IgnitionConfig{handoff.ConfigNode: {Path: "config.ign", Version: "3.2.0"}}})
	const url = "image://quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef#/coreos/coreos-x86_64.iso"
	tests := []struct {
		name    string
		iso     lockfile.LockedISO
		place   bool // copy the fixture to <upstream>/iso/live.iso
		wantErr string
		wantIs  error
	}{
		{"extracted", lockfile.LockedISO{URL: url, Path: "iso/live.iso", SHA256: isoSum, From: "machine-os-images"}, true, "", nil},
		{"sha256 mismatch", lockfile.LockedISO{URL: url, Path: "iso/live.iso", SHA256: strings.Repeat("0", 64), From: "machine-os-images"}, true,
			"has sha256 " + isoSum + ", but its lock pins " + strings.Repeat("0", 64), coreiso.ErrMalformed},
		{"not extracted", lockfile.LockedISO{URL: url, From: "machine-os-images"}, false, "records no extracted file", nil},
		{"file missing", lockfile.LockedISO{URL: url, Path: "iso/live.iso", SHA256: isoSum, From: "machine-os-images"}, false, "no such file", fs.ErrNotExist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upstream := t.TempDir()
			l := &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion, Arch: "x86_64", ISO: &tc.iso}
			if err := lockfile.WriteLock(filepath.Join(upstream, lockfile.File), l); err != nil {
				t.Fatal(err)
			}
			writeRecord(t, upstream, handoff.Resolve{Lock: lockfile.File, ISO: handoff.File(tc.iso.Path)})
			if tc.place {
				if err := os.MkdirAll(filepath.Join(upstream, "iso"), 0o755); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(iso)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(upstream, "iso", "live.iso"), b, 0o444); err != nil {
					t.Fatal(err)
				}
			}
			s := New(StageOptions{ISOFromResolve: true})
			if fmt.Sprint(s.Deps) != "[render resolve]" || s.Files != nil {
				t.Fatalf("stage = %+v", s)
			}
			out := t.TempDir()
			env := &pipeline.Env{Out: out, Inputs: map[string]string{"render": renderDir, "resolve": upstream},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			err := s.Run(context.Background(), env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tc.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := coreiso.ShowIgnition(filepath.Join(out, OutputISO))
			if err != nil || !bytes.Equal(got, cfg) {
				t.Fatalf("show = %q, %v", got, err)
			}
			// The upstream output is read, never changed.
			if coreisotest.SHA256(t, filepath.Join(upstream, "iso", "live.iso")) != isoSum {
				t.Error("the upstream ISO changed")
			}
		})
	}
}

// testConfig is a small valid Ignition config that tag makes unique.
func testConfig(tag string) []byte {
	return []byte(fmt.Sprintf(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/tag","contents":{"source":"data:,%s"}}]}}`, tag))
}

// writeRecord writes an upstream stage's output record into dir, as the engine would.
func writeRecord(t *testing.T, dir string, rec any) {
	t.Helper()
	if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
		t.Fatal(err)
	}
}
