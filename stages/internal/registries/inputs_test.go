package registries

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// hostile makes at path what a small input must refuse and returns what the error says
// besides the path: a FIFO with no writer (which would block containers/image's
// os.ReadFile), a symlink to /dev/zero (which would feed it until memory runs out), a
// directory, or a sparse file one byte over limit.
func hostile(t *testing.T, kind, path string, limit int64) string {
	t.Helper()
	var err error
	want := "not a regular file"
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "/dev/zero":
		err = os.Symlink("/dev/zero", path)
	case "directory":
		err = os.Mkdir(path, 0o700)
	case "over the cap":
		if err = os.WriteFile(path, nil, 0o600); err == nil {
			err = os.Truncate(path, limit+1)
		}
		want = fmt.Sprintf("larger than %d bytes", limit)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// Every file a SystemContext hands containers/image is read through smallfile first: a
// special or huge file named as registries.conf, policy.json, a key the policy names or
// the pull secret is bad input naming the file and the cap, and nothing is left behind.
func TestSystemContextRefusesSpecialAndHugeInputs(t *testing.T) {
	inputs := []struct {
		name  string
		limit int64
		// setup returns where the hostile file goes and the configuration naming it.
		setup func(dir string) (string, Config, pipeline.SecretSource)
	}{
		{"registries.conf", MaxRegistriesConf, func(dir string) (string, Config, pipeline.SecretSource) {
			p := filepath.Join(dir, "registries.conf")
			return p, Config{RegistriesConf: p}, nil
		}},
		{"policy.json", trust.MaxPolicyFile, func(dir string) (string, Config, pipeline.SecretSource) {
			p := filepath.Join(dir, "policy.json")
			return p, Config{PolicyFile: p}, nil
		}},
		{"a key the policy names", trust.MaxPolicyKeyFile, func(dir string) (string, Config, pipeline.SecretSource) {
			key, policy := filepath.Join(dir, "key.pub"), filepath.Join(dir, "policy.json")
			os.WriteFile(policy, fmt.Appendf(nil, `{"default":[{"type":"sigstoreSigned","keyPath":%q}]}`, key), 0o600)
			return key, Config{PolicyFile: policy}, nil
		}},
		{"a registry certificate in $HOME", trust.MaxCertFile, func(dir string) (string, Config, pipeline.SecretSource) {
			t.Setenv("HOME", dir)
			host := filepath.Join(dir, ".config", "containers", "certs.d", "registry.example.com:5000")
			os.MkdirAll(host, 0o700)
			return filepath.Join(host, "ca.crt"), Config{}, nil
		}},
		{"the pull secret", pipeline.MaxSecretFile, func(dir string) (string, Config, pipeline.SecretSource) {
			p := filepath.Join(dir, "auth.json")
			return p, Config{PullSecret: "pull"}, pipeline.SecretFiles{"pull": p}
		}},
	}
	for _, in := range inputs {
		for _, kind := range []string{"fifo", "/dev/zero", "directory", "over the cap"} {
			t.Run(in.name+"/"+kind, func(t *testing.T) {
				dir, scratch := t.TempDir(), t.TempDir()
				p, cfg, secrets := in.setup(dir)
				want := hostile(t, kind, p, in.limit)
				var cl pipeline.Cleanups
				_, err := SystemContext(t.Context(), scratch, cfg, secrets, "x86_64", &cl)
				if err == nil {
					t.Fatal("accepted")
				}
				if !badinput.Is(err) {
					t.Errorf("%v is not bad input", err)
				}
				for _, s := range []string{p, want} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%q does not say %q", err, s)
					}
				}
				if err := cl.Run(); err != nil {
					t.Fatal(err)
				}
				if left, _ := os.ReadDir(scratch); len(left) > 0 {
					t.Errorf("left in the scratch directory: %v", left)
				}
			})
		}
	}
}

// containers/image reads private copies, 0600, not the user's files; a malformed
// registries.conf is bad input naming the user's file, not the copy.
func TestSystemContextCopiesInputs(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	conf, policy := filepath.Join(dir, "registries.conf"), filepath.Join(dir, "policy.json")
	os.WriteFile(conf, []byte("unqualified-search-registries = []\n"), 0o644)
	os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644)
	var cl pipeline.Cleanups
	sys, err := SystemContext(context.Background(), scratch, Config{RegistriesConf: conf, PolicyFile: policy}, nil, "", &cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sys.SystemRegistriesConfPath, sys.SignaturePolicyPath} {
		if !strings.HasPrefix(p, scratch+"/") {
			t.Errorf("containers/image reads %s, not a private copy in %s", p, scratch)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want a 0600 copy", p, fi, err)
		}
	}
	if err := cl.Run(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(scratch); len(left) > 0 {
		t.Errorf("copies left after the cleanup: %v", left)
	}

	os.WriteFile(conf, []byte("[[registry]\n"), 0o644)
	_, err = SystemContext(context.Background(), scratch, Config{RegistriesConf: conf}, nil, "", &cl)
	if !badinput.Is(err) || !strings.Contains(fmt.Sprint(err), conf) {
		t.Errorf("malformed registries.conf: %v; want bad input naming %s", err, conf)
	}
	cl.Run()
}
