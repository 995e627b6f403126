package liveiso

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
)

func TestStage(t *testing.T) {
	iso := fixture(t, "embed-areas-2023-07.x86_64.iso")
	renderDir := t.TempDir()
	cfg := testConfig("stage")
	if err := os.WriteFile(filepath.Join(renderDir, "config.ign"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(renderDir, "render.json"),
		[]byte(`{"target":"coreos","ignition":{"config":{"path":"config.ign","version":"3.3.0","size":1,"secret":true}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
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
	got, err := ShowIgnition(filepath.Join(out, OutputISO))
	if err != nil || !bytes.Equal(got, cfg) {
		t.Fatalf("show = %q, %v", got, err)
	}
	if st, _ := os.Stat(filepath.Join(out, OutputISO)); st.Mode().Perm() != 0o600 {
		t.Errorf("an ISO holding a secret config has mode %v", st.Mode().Perm())
	}
	var rep Report
	raw, _ := os.ReadFile(filepath.Join(out, ReportFile))
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Strategy != StrategyPatch || rep.Output != OutputISO || rep.NetworkFiles != 1 {
		t.Fatalf("report %s, %v", raw, err)
	}
	// a render output without the named config is a clear error
	s = New(StageOptions{ISOPath: iso, ConfigName: "worker"})
	if err := s.Run(context.Background(), &pipeline.Env{Out: t.TempDir(), Inputs: map[string]string{"render": renderDir}, Log: env.Log}); err == nil {
		t.Fatal("missing config accepted")
	}
}
