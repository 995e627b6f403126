package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// report --log sends the end of a log as the log= detail: the last lines only.
func TestAgentReportLog(t *testing.T) {
	dir := t.TempDir()
	port := filepath.Join(dir, "port") // an existing path is written as is
	logFile := filepath.Join(dir, "unit.log")
	var b strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	os.WriteFile(port, nil, 0o644)
	os.WriteFile(logFile, []byte(b.String()), 0o644)
	code, _, stderr := runCLI("agent", "report", "--port", port, "--state-dir", filepath.Join(dir, "state"),
		"--phase", wire.PhaseUnits, "--status", "failed", "--detail", "error=unit x failed", "--log", logFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, _ := os.Open(port)
	defer f.Close()
	m, err := wire.NewDecoder(f).Next()
	if err != nil {
		t.Fatal(err)
	}
	log := m.Details[wire.DetailLog]
	if !strings.HasPrefix(log, "line 11\n") || !strings.HasSuffix(log, "line 50") || m.Details[wire.DetailError] != "unit x failed" {
		t.Errorf("details %q", m.Details)
	}
}

// run-units exits non-zero at a failing unit, lists it, and leaves its output's tail in
// --failure-log for the report.
func TestAgentRunUnits(t *testing.T) {
	root := t.TempDir()
	units := filepath.Join(root, "etc/systemd/system")
	os.MkdirAll(filepath.Join(units, "multi-user.target.wants"), 0o755)
	os.WriteFile(filepath.Join(units, "a-ok.service"), []byte("[Service]\nType=oneshot\nExecStart=echo fine\n"), 0o644)
	os.WriteFile(filepath.Join(units, "b-bad.service"), []byte("[Service]\nType=oneshot\nExecStart=sh -c 'echo broken-output; exit 4'\n"), 0o644)
	os.Symlink("../a-ok.service", filepath.Join(units, "multi-user.target.wants/a-ok.service"))
	os.Symlink("../b-bad.service", filepath.Join(units, "multi-user.target.wants/b-bad.service"))
	failure := filepath.Join(t.TempDir(), "failure.log")
	code, stdout, stderr := runCLI("agent", "run-units", "--root", root, "--failure-log", failure)
	if code == 0 || !strings.Contains(stderr, "b-bad.service") || !strings.Contains(stderr, "exit status 4") {
		t.Fatalf("exit %d, stderr %q: want a failure naming b-bad.service", code, stderr)
	}
	if !strings.Contains(stdout, "a-ok.service ok ") || !strings.Contains(stdout, "b-bad.service failed ") {
		t.Errorf("stdout %q", stdout)
	}
	if b, _ := os.ReadFile(failure); !strings.Contains(string(b), "broken-output") {
		t.Errorf("failure log %q lacks the unit's output", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "var/log/snofactory/units/a-ok.service.log")); !strings.Contains(string(b), "fine") {
		t.Errorf("a-ok.service's log %q", b)
	}
}
