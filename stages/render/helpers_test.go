package render

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"

	"github.com/snofactory/snofactory/test/testbin"
)

// A pull secret and SSH key that must never show up in manifests/ or render.json.
const (
	testPullSecret = `{"auths":{"quay.io":{"auth":"c25vZmFjdG9yeS10ZXN0OnB1bGwtc2VjcmV0LWNhbmFyeQ==","email":"canary@example.com"}}}`
	testSSHKey     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNub2ZhY3RvcnktdGVzdC1zc2gta2V5LWNhbmFyeQ canary@example.com"
)

// testSecrets writes the test secrets to files and serves them as the CLI does.
func testSecrets(t *testing.T) pipeline.SecretFiles {
	t.Helper()
	dir := t.TempDir()
	s := pipeline.SecretFiles{}
	// The pull secret file is laid out over several lines, as people save them.
	pretty := strings.Replace(testPullSecret, `{"quay.io"`, "{\n  \"quay.io\"", 1) + "\n"
	for name, v := range map[string]string{SecretPullSecret: pretty, SecretSSHKey: testSSHKey + "\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		s[name] = p
	}
	return s
}

// standInVersion is the version the stand-in reports: the build tag of an installer taken
// from the release's installer image (recorded/version.txt).
const standInVersion = "4.16.0-202406111407.p0.g37c9f6e.assembly.stream.el9"

// standIn is the recorded openshift-install stand-in (see its header: it is not the real
// installer; it replays the real output formats).
func standIn(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("testdata/openshift-install-standin/openshift-install")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ignitionValidate runs Debian's ignition-validate on a config and fails on any output.
func ignitionValidate(t *testing.T, path string) {
	t.Helper()
	tool := testbin.Require(t, "ignition-validate", "ignition")
	out, err := exec.Command(tool, path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("ignition-validate %s: %v\n%s", path, err, out)
	}
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// renderTo runs Render into a fresh directory and returns it.
func renderTo(t *testing.T, opts Options) string {
	t.Helper()
	out := t.TempDir()
	if err := Render(context.Background(), opts, testSecrets(t), out, testLog(t)); err != nil {
		t.Fatalf("Render: %v", err)
	}
	return out
}

// readTree returns every file below dir by slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err // directories; symlinks (the engine links outputs) are read where they point
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// writeFragments writes Butane fragments to files and returns them as Options fields.
func writeFragments(t *testing.T, texts ...string) ([]Fragment, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	var frags []Fragment
	host := map[string]string{}
	for i, s := range texts {
		label := "butane/" + string(rune('a'+i)) + ".bu"
		p := filepath.Join(dir, filepath.Base(label))
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		frags = append(frags, Fragment{File: label})
		host[label] = p
	}
	return frags, host
}

func execOutput(tool string, args ...string) (string, error) {
	out, err := exec.Command(tool, args...).CombinedOutput()
	return string(out), err
}

func sortStrings(s []string) { sort.Strings(s) }
