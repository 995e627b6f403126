package registries

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
)

// secretMap serves pipeline secrets from memory.
type secretMap map[string]string

func (s secretMap) Secret(name string) ([]byte, error) { return []byte(s[name]), nil }

// The pull secret lands in the caller's scratch directory (private, removed by the engine even
// after a crash), never in the system temp directory unless no scratch directory is given.
func TestSystemContextScratch(t *testing.T) {
	const auth = `{"auths":{"127.0.0.1:5000":{"auth":"ZGVwb3Q6czNjcmV0"}}}`
	tests := []struct {
		name    string
		scratch bool
	}{
		{"stage scratch directory", true},
		{"no scratch directory: system temp", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scratch := ""
			if tc.scratch {
				scratch = t.TempDir()
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			var cl pipeline.Cleanups
			sys, err := SystemContext(context.Background(), scratch, Config{PullSecret: "pull-secret", Insecure: []string{"127.0.0.1:5000"}},
				secretMap{"pull-secret": auth}, "x86_64", &cl)
			if err != nil {
				t.Fatal(err)
			}
			want := tmp
			if tc.scratch {
				want = scratch
			}
			for _, p := range []string{sys.AuthFilePath, sys.SystemRegistriesConfDirPath, sys.BigFilesTemporaryDir} {
				if !strings.HasPrefix(p, want+string(filepath.Separator)) {
					t.Errorf("%s is not below %s", p, want)
				}
			}
			fi, err := os.Stat(sys.AuthFilePath)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("auth file mode %v, want 0600", fi.Mode().Perm())
			}
			if b, _ := os.ReadFile(sys.AuthFilePath); string(b) != auth {
				t.Errorf("auth file holds %q", b)
			}
			if dir, _ := os.Stat(filepath.Dir(sys.AuthFilePath)); dir.Mode().Perm() != 0o700 {
				t.Errorf("configuration directory mode %v, want 0700", dir.Mode().Perm())
			}
			if tc.scratch {
				if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
					t.Errorf("system temp directory holds %v", ents)
				}
			}
			if err := cl.Run(); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{tmp, scratch} {
				if ents, _ := os.ReadDir(d); d != "" && len(ents) != 0 {
					t.Errorf("after cleanup %s still holds %v", d, ents)
				}
			}
		})
	}
}

func TestRegistriesDropIn(t *testing.T) {
	got := registriesDropIn(Config{Insecure: []string{"127.0.0.1:5000"}, Mirrors: []Mirror{{Source: "quay.io/ocp", Mirrors: []string{"127.0.0.1:5000/ocp"}}}})
	want := `[[registry]]
prefix = "quay.io/ocp"
location = "quay.io/ocp"
insecure = false
mirror-by-digest-only = true
[[registry.mirror]]
location = "127.0.0.1:5000/ocp"
insecure = true

[[registry]]
location = "127.0.0.1:5000"
insecure = true

`
	if got != want {
		t.Errorf("drop-in:\n%s\nwant:\n%s", got, want)
	}
}

// The files and secrets a stage declares for its key are exactly those the config names.
func TestConfigFilesAndSecrets(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		wantFiles   map[string]string
		wantSecrets []string
	}{
		{"none", Config{Insecure: []string{"localhost:5000"}}, map[string]string{}, nil},
		{"all", Config{RegistriesConf: "/etc/r.conf", PolicyFile: "/etc/p.json", PullSecret: "ps"},
			map[string]string{"registries.conf": "/etc/r.conf", "policy.json": "/etc/p.json"}, []string{"ps"}},
		{"policy only", Config{PolicyFile: "/p.json"}, map[string]string{"policy.json": "/p.json"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.Files(); !maps.Equal(got, tc.wantFiles) {
				t.Errorf("Files() = %v, want %v", got, tc.wantFiles)
			}
			if got := tc.cfg.Secrets(); !slices.Equal(got, tc.wantSecrets) {
				t.Errorf("Secrets() = %v, want %v", got, tc.wantSecrets)
			}
		})
	}
}
