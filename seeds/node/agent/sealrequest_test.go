package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

func TestSaveSealRequest(t *testing.T) {
	dir := t.TempDir()
	req := &wire.SealRequest{Version: wire.SealRequestVersion, Target: "coreos"}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"written 0600", filepath.Join(dir, "seal.json"), ""},
		{"no such directory", filepath.Join(dir, "none", "seal.json"), "writing the seal request: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SaveSealRequest(tc.path, req)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q...", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(tc.path)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("stat %v, %v: want mode 0600", st, err)
			}
			b, _ := os.ReadFile(tc.path)
			var back wire.SealRequest
			if err := json.Unmarshal(b, &back); err != nil || back.Target != req.Target || back.Version != req.Version {
				t.Errorf("read back %+v, %v", back, err)
			}
		})
	}
}

func TestWriteFailureLog(t *testing.T) {
	dir := t.TempDir()
	unitLog := filepath.Join(dir, "unit.log")
	var lines []string
	for i := range wire.LogDetailLines + 5 {
		lines = append(lines, "line "+strings.Repeat("x", i%3))
	}
	if err := os.WriteFile(unitLog, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, log, want string
	}{
		{"the tail of the log", unitLog, strings.Join(lines[5:], "\n") + "\n"},
		{"why the log could not be read", filepath.Join(dir, "none.log"), "none.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "failure.log")
			if err := WriteFailureLog(out, tc.log); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(out)
			if !strings.Contains(string(got), tc.want) || !strings.HasSuffix(string(got), "\n") {
				t.Errorf("got %q, want it to hold %q", got, tc.want)
			}
		})
	}
}
