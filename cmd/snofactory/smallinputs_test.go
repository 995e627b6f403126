package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/blueprints/depotfile"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/depot"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/manifest"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
	"github.com/snofactory/snofactory/stages/validate"
	"github.com/snofactory/snofactory/test/testbin"
)

// hostileSmallFile makes, at path, what a small input must refuse: a FIFO with no writer,
// a symlink to /dev/zero, or a sparse file one byte over limit (no data is written). It
// returns what the error must say besides the path.
func hostileSmallFile(t *testing.T, kind, path string, limit int64) string {
	t.Helper()
	var err error
	want := "not a regular file"
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "/dev/zero":
		err = os.Symlink("/dev/zero", path)
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

// copyImageBasedConfig copies the image-based installer's sample image-based-config.yaml
// into dir and returns the copy; nothing is beside it.
func copyImageBasedConfig(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "seeds", "site", "siteconfig", "testdata", "image-based", "image-based-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "image-based-config.yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// smallSeed writes a seed directory of a 1 MiB disk in dir and returns it.
func smallSeed(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "seed")
	seedtest.Write(t, p, seedtest.Options{RawSize: 1 << 20, Seed: 3, Formats: []string{seed.FormatRaw}})
	return p
}

// copyBlueprint copies blueprints/NAME.yaml and its directory into dir and returns the
// copy of the blueprint.
func copyBlueprint(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join("..", "..", "blueprints", name))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "blueprints", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listTree lists every path under dir with its size, to tell that a command wrote nothing.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			fi, _ := d.Info()
			out = append(out, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
		}
		return nil
	})
	return out
}

// agentReport is the command line of an agent report from dir, to a port that is a regular
// file there (written as is), with flags added.
func agentReport(dir string, flags ...string) []string {
	port := filepath.Join(dir, "port")
	os.WriteFile(port, nil, 0o644)
	return append([]string{"agent", "report", "--phase", "x", "--status", "info", "--port", port,
		"--state-dir", filepath.Join(dir, "state")}, flags...)
}

// agent report --log reads only the log's end, so a log has no cap, but it must be a
// regular file: a FIFO or /dev/zero is refused before anything is sent, exit 2, naming it;
// a sparse log of 1 GiB is sent as its last line within the child's memory limit.
func TestAgentReportLogIsBounded(t *testing.T) {
	for _, kind := range []string{"fifo", "/dev/zero"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "unit.log")
			want := hostileSmallFile(t, kind, p, 0)
			args := agentReport(dir, "--log", p)
			before := listTree(t, dir)
			code, stderr := runGuarded(t, args...)
			if code != exitBadInput || !strings.Contains(stderr, p) || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d naming %s and %q: %s", code, exitBadInput, p, want, stderr)
			}
			if after := listTree(t, dir); !slices.Equal(before, after) {
				t.Errorf("the refused report changed %s: %v, then %v", dir, before, after)
			}
		})
	}
	t.Run("1 GiB", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "unit.log")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt([]byte("the last line\n"), 1<<30)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		args := agentReport(dir, "--log", p)
		if code, stderr := runGuarded(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "port"))
		m, err := wire.NewDecoder(bytes.NewReader(b)).Next()
		if err != nil {
			t.Fatal(err)
		}
		if log := m.Details[wire.DetailLog]; !strings.HasSuffix(log, "the last line") || len(log) > wire.MaxLogDetailBytes {
			t.Errorf("log detail of %d bytes ending %q", len(log), log[max(0, len(log)-40):])
		}
	})
}

// runGuarded runs the real binary through runMain: a read that blocks ends with the test's
// context and fails the test with the command named, and one that grows hits the child's
// memory limit instead of growing the test binary.
func runGuarded(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	code, _, stderr = runMain(t, args...)
	return code, stderr
}

// TestSmallInputsRefuseSpecialAndHugeFiles gives every small input a command reads a FIFO,
// /dev/zero and a file over its cap: each is refused at once, exit 2, with the file and the
// cap (or "not a regular file") named.
func TestSmallInputsRefuseSpecialAndHugeFiles(t *testing.T) {
	enforcing := func(dir, keyPath string) string {
		p := filepath.Join(dir, "policy.json")
		os.WriteFile(p, fmt.Appendf(nil, `{"default":[{"type":"sigstoreSigned","keyPath":%q}]}`, keyPath), 0o644)
		return p
	}
	// pull applies the policy (and --from) before it reads the layout, so an empty one does.
	pull := func(dir string, flags ...string) []string {
		os.Mkdir(filepath.Join(dir, "layout"), 0o755)
		return append(append([]string{"seed", "pull"}, flags...), "oci:"+filepath.Join(dir, "layout")+":v1", filepath.Join(dir, "seed"))
	}
	inputs := []struct {
		name  string
		limit int64
		// setup prepares a directory around the hostile file and returns where the hostile
		// file goes and the command line.
		setup func(dir string) (hostile string, args []string)
	}{
		{"--policy", trust.MaxPolicyFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "policy.json")
			return p, pull(dir, "--policy", p)
		}},
		{"a trust policy's keyPath", trust.MaxPolicyKeyFile, func(dir string) (string, []string) {
			key := filepath.Join(dir, "key.pub")
			return key, pull(dir, "--policy", enforcing(dir, key))
		}},
		{"a registries.d file", trust.MaxRegistriesFile, func(dir string) (string, []string) {
			key := filepath.Join(dir, "key.pub")
			os.WriteFile(key, []byte("not read before the policy applies"), 0o644)
			regd := filepath.Join(dir, "registries.d")
			os.Mkdir(regd, 0o755)
			return filepath.Join(regd, "default.yaml"), pull(dir, "--policy", enforcing(dir, key), "--registries.d", regd)
		}},
		{"seed inspect --policy of a seed directory", trust.MaxPolicyFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "policy.json")
			return p, []string{"seed", "inspect", "--policy", p, smallSeed(t, dir)}
		}},
		{"REGISTRY_AUTH_FILE for the signature check", trust.MaxAuthFile, func(dir string) (string, []string) {
			key := filepath.Join(dir, "key.pub")
			os.WriteFile(key, []byte("not parsed before the credentials are read"), 0o644)
			regd := filepath.Join(dir, "registries.d")
			os.Mkdir(regd, 0o755)
			p := filepath.Join(dir, "auth.json")
			t.Setenv("REGISTRY_AUTH_FILE", p)
			return p, pull(dir, "--policy", enforcing(dir, key), "--registries.d", regd)
		}},
		// Nothing listens on port 1: the inputs are read before any connection.
		{"release info --authfile", pipeline.MaxSecretFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "auth.json")
			return p, []string{"release", "info", "--authfile", p, "127.0.0.1:1/ocp/release:4.16"}
		}},
		{"release info --registries-conf", 1 << 20, func(dir string) (string, []string) {
			p := filepath.Join(dir, "registries.conf")
			return p, []string{"release", "info", "--registries-conf", p, "127.0.0.1:1/ocp/release:4.16"}
		}},
		{"--kubeconfig", validate.MaxKubeconfigFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "kubeconfig")
			return p, []string{"cluster", "check", "--kubeconfig", p}
		}},
		{"a depot's depot.json", depot.MaxStatusFile, func(dir string) (string, []string) {
			return filepath.Join(dir, depot.StatusFile), []string{"depot", "status", dir}
		}},
		{"a blueprint's pull secret", pipeline.MaxSecretFile, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			secret := filepath.Join(dir, "du-profile", "pull-secret.json")
			os.Remove(secret)
			return secret, []string{"validate", bp}
		}},
		{"build --locked's lock file", 16 << 20, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			return filepath.Join(dir, "du-profile.lock.json"), []string{"build", "--locked", "--until", "resolve",
				"--output-dir", filepath.Join(dir, "out"), "--cache-dir", filepath.Join(dir, "cache"), bp}
		}},
		{"registry credentials (REGISTRY_AUTH_FILE)", 1 << 20, func(dir string) (string, []string) {
			p := filepath.Join(dir, "auth.json")
			t.Setenv("REGISTRY_AUTH_FILE", p)
			// Nothing listens on port 1: the credentials are read before any connection.
			return p, []string{"seed", "inspect", "docker://127.0.0.1:1/seeds/demo:1"}
		}},
		{"iso embed --network-keyfile", coreiso.MaxKeyfile, func(dir string) (string, []string) {
			iso := filepath.Join(dir, "live.iso")
			os.WriteFile(iso, []byte("not read before the keyfiles"), 0o644)
			ign := filepath.Join(dir, "config.ign")
			os.WriteFile(ign, []byte(`{"ignition":{"version":"3.4.0"}}`), 0o644)
			p := filepath.Join(dir, "eth0.nmconnection")
			return p, []string{"iso", "embed", "-i", ign, "--network-keyfile", p, "-o", filepath.Join(dir, "out.iso"), iso}
		}},
		{"an OCI layout's index.json", 4 << 20, func(dir string) (string, []string) {
			layout := filepath.Join(dir, "layout")
			os.Mkdir(layout, 0o755)
			return filepath.Join(layout, "index.json"), []string{"seed", "inspect", "oci:" + layout + ":v1"}
		}},
		{"seed push --attach", 64 << 20, func(dir string) (string, []string) {
			seedDir := filepath.Join(dir, "seed")
			seedtest.Write(t, seedDir, seedtest.Options{RawSize: 1 << 20, Seed: 3, Formats: []string{seed.FormatRaw}})
			p := filepath.Join(dir, "report.json")
			return p, []string{"seed", "push", "--attach", p + "=application/json", seedDir, "oci:" + filepath.Join(dir, "pushed") + ":v1"}
		}},
		{"site-config validate's site config", siteconfig.MaxFileSize, func(dir string) (string, []string) {
			p := filepath.Join(dir, "site.yaml")
			return p, []string{"site-config", "validate", p}
		}},
		{"site-config create's site config", siteconfig.MaxFileSize, func(dir string) (string, []string) {
			p := filepath.Join(dir, "site.yaml")
			return p, []string{"site-config", "create", p, "-o", filepath.Join(dir, "site.iso")}
		}},
		{"image-based-config.yaml", siteconfig.MaxFileSize, func(dir string) (string, []string) {
			p := filepath.Join(dir, "image-based-config.yaml")
			return p, []string{"site-config", "validate", p}
		}},
		{"install-config.yaml beside an image-based-config.yaml", siteconfig.MaxFileSize, func(dir string) (string, []string) {
			ibi := copyImageBasedConfig(t, dir)
			return filepath.Join(dir, "install-config.yaml"), []string{"site-config", "validate", ibi}
		}},
		{"a file in a site's extra-manifests/", manifest.MaxInlineSize, func(dir string) (string, []string) {
			ibi := copyImageBasedConfig(t, dir)
			os.Mkdir(filepath.Join(dir, "extra-manifests"), 0o755)
			return filepath.Join(dir, "extra-manifests", "cm.yaml"), []string{"site-config", "validate", ibi}
		}},
		{"the blueprint", blueprints.MaxFileSize, func(dir string) (string, []string) {
			p := filepath.Join(dir, "seed.yaml")
			return p, []string{"validate", p}
		}},
		{"a file in a blueprint's extra-manifests/", manifest.MaxFileSize, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			return filepath.Join(dir, "du-profile", "extra-manifests", "hostile.yaml"), []string{"validate", bp}
		}},
		{"a blueprint's Butane fragment", 1 << 20, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			p := filepath.Join(dir, "du-profile", "sctp.bu")
			os.Remove(p)
			return p, []string{"validate", bp}
		}},
		{"a blueprint's SSH public key", 64 << 10, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			p := filepath.Join(dir, "du-profile", "id_ed25519.pub")
			os.Remove(p)
			return p, []string{"validate", bp}
		}},
		{"a blueprint's signaturePolicyFile", 1 << 20, func(dir string) (string, []string) {
			bp := copyBlueprint(t, dir, "du-profile")
			b, _ := os.ReadFile(bp)
			os.WriteFile(bp, []byte(strings.Replace(string(b), "\nspec:\n", "\nspec:\n  signaturePolicyFile: policy.json\n", 1)), 0o644)
			return filepath.Join(dir, "policy.json"), []string{"validate", bp}
		}},
		{"a depot file", depotfile.MaxFileSize, func(dir string) (string, []string) {
			p := filepath.Join(dir, "depot.yaml")
			return p, []string{"depot", "run", p, "--output-dir", filepath.Join(dir, "out"), "--cache-dir", filepath.Join(dir, "cache")}
		}},
		{"keys generate --passphrase-file", 64 << 10, func(dir string) (string, []string) {
			p := filepath.Join(dir, "passphrase")
			return p, []string{"keys", "generate", "--passphrase-file", p, filepath.Join(dir, "k")}
		}},
		{"seed push --passphrase-file", 64 << 10, func(dir string) (string, []string) {
			key := filepath.Join(dir, "k.key")
			os.WriteFile(key, []byte("not read before the passphrase"), 0o600)
			p := filepath.Join(dir, "passphrase")
			return p, []string{"seed", "push", "--sign-by", key, "--passphrase-file", p, smallSeed(t, dir), "127.0.0.1:1/seeds/demo:1"}
		}},
		{"seed push --sign-by", 64 << 10, func(dir string) (string, []string) {
			pass := filepath.Join(dir, "passphrase")
			os.WriteFile(pass, []byte("secret\n"), 0o600)
			p := filepath.Join(dir, "k.key")
			return p, []string{"seed", "push", "--sign-by", p, "--passphrase-file", pass, smallSeed(t, dir), "127.0.0.1:1/seeds/demo:1"}
		}},
		{"seed inspect --key", 64 << 10, func(dir string) (string, []string) {
			p := filepath.Join(dir, "k.pub")
			return p, []string{"seed", "inspect", "--key", p, smallSeed(t, dir)}
		}},
		{"iso embed -i", coreiso.MaxIgnitionFile, func(dir string) (string, []string) {
			iso := filepath.Join(dir, "live.iso")
			os.WriteFile(iso, []byte("not read before the config"), 0o644)
			p := filepath.Join(dir, "config.ign")
			return p, []string{"iso", "embed", "-i", p, "-o", filepath.Join(dir, "out.iso"), iso}
		}},
		{"agent report --detail-file", agent.MaxDetailFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "detail")
			return p, agentReport(dir, "--detail-file", "k="+p)
		}},
		{"agent report --ignition-config", agent.MaxIgnitionConfigFile, func(dir string) (string, []string) {
			p := filepath.Join(dir, "config.ign")
			return p, agentReport(dir, "--files-root", dir, "--ignition-config", p)
		}},
	}
	// A blueprint names a file in its extra-manifests/ as the blueprint's own reference
	// does, relative to the blueprint, at the blueprint's line.
	namedAsWritten := map[string]bool{"a file in a blueprint's extra-manifests/": true}
	for _, in := range inputs {
		for _, kind := range []string{"fifo", "/dev/zero", "over the cap"} {
			t.Run(in.name+"/"+kind, func(t *testing.T) {
				dir := t.TempDir()
				hostile, args := in.setup(dir)
				want := hostileSmallFile(t, kind, hostile, in.limit)
				if in.name == "a depot's depot.json" && kind == "/dev/zero" {
					// The /dev/zero case is a symlink, and a depot's status file is never
					// followed: refused before it is opened.
					want = "is a symlink"
				}
				before := listTree(t, dir)
				code, stderr := runGuarded(t, args...)
				if code != exitBadInput {
					t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
				}
				if after := listTree(t, dir); !slices.Equal(before, after) {
					t.Errorf("the refused command changed %s: %v, then %v", dir, before, after)
				}
				names := hostile
				if namedAsWritten[in.name] {
					names, _ = filepath.Rel(dir, hostile)
				}
				for _, s := range []string{names, want} {
					if !strings.Contains(stderr, s) {
						t.Errorf("stderr does not say %q: %s", s, stderr)
					}
				}
			})
		}
	}
}

// A registry's certificates are read by containers/image from the per-host certificate
// directories, $HOME's first: a FIFO, /dev/zero or a huge file there is refused before
// any connection (nothing listens on port 1), exit 2, naming the file and the cap. HOME
// is the child's only: the test process keeps its own (its build cache is there).
func TestRegistryCertificatesAreSmallInputs(t *testing.T) {
	for _, kind := range []string{"fifo", "/dev/zero", "over the cap"} {
		t.Run(kind, func(t *testing.T) {
			home := t.TempDir()
			host := filepath.Join(home, ".config", "containers", "certs.d", "127.0.0.1:1")
			if err := os.MkdirAll(host, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(host, "ca.crt")
			want := hostileSmallFile(t, kind, p, trust.MaxCertFile)
			code, _, stderr := runMainWith(t, func(c *exec.Cmd) { c.Env = append(c.Env, "HOME="+home) },
				"release", "info", "127.0.0.1:1/ocp/release:4.16")
			if code != exitBadInput || !strings.Contains(stderr, p) || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr %q; want %d naming %s and %q", code, stderr, exitBadInput, p, want)
			}
		})
	}
}

// The big inputs, an oci-archive:, a raw disk given to --from, an ISO given to the iso
// commands and the site-config medium of seed boot, have no cap (they are read as streams)
// but must still be regular files (or, for --from and the medium, a block device; for
// --from, a seed directory): a FIFO or /dev/zero is refused before anything reads it, and
// nothing is written.
func TestBigInputsMustBeRegularFiles(t *testing.T) {
	for _, kind := range []string{"fifo", "/dev/zero"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "hostile")
			want := hostileSmallFile(t, kind, p, 0)
			layout := filepath.Join(dir, "layout")
			os.Mkdir(layout, 0o755)
			ign := filepath.Join(dir, "config.ign")
			os.WriteFile(ign, []byte(`{"ignition":{"version":"3.4.0"}}`), 0o644)
			out := filepath.Join(dir, "out.iso")
			for _, args := range [][]string{
				{"seed", "inspect", "oci-archive:" + p + ":v1"},
				{"seed", "pull", "oci-archive:" + p + ":v1", filepath.Join(dir, "seed")},
				{"seed", "pull", "--from", p, "oci:" + layout + ":v1", filepath.Join(dir, "seed")},
				{"seed", "write", "--from", p, "--image", "oci:" + layout + ":v1", "--device", filepath.Join(dir, "disk.img")},
				{"iso", "embed", "-i", ign, "-o", out, p},
				{"iso", "embed", "-i", ign, p},
				{"iso", "show", p},
				{"iso", "kargs", "show", p},
				{"iso", "kargs", "modify", "-a", "quiet", "-o", out, p},
				{"seed", "boot", "--site-config", p, filepath.Join(dir, "seed")},
			} {
				code, stderr := runGuarded(t, args...)
				if code != exitBadInput || !strings.Contains(stderr, p) || !strings.Contains(stderr, want) {
					t.Errorf("%v: exit %d, want %d naming %s and %q: %s", args, code, exitBadInput, p, want, stderr)
				}
				for _, o := range []string{out, filepath.Join(dir, "seed"), filepath.Join(dir, "disk.img")} {
					if _, err := os.Lstat(o); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%v wrote %s", args, o)
					}
				}
			}
		})
	}
}

// A registries.d file that containers/image cannot decode, or two that define the same
// namespace, is bad input: exit 2 before the pull starts, naming the file and the line.
func TestMalformedRegistriesDIsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		says  []string
	}{
		{"not YAML", map[string]string{"a.yaml": "docker:\n  reg.example/ns: [\n"}, []string{"a.yaml", "line"}},
		{"wrong shape", map[string]string{"a.yaml": "docker:\n  reg.example/ns: 5\n"}, []string{"a.yaml", "line 2"}},
		{"a namespace twice", map[string]string{"a.yaml": "docker:\n  reg.example/ns:\n    lookaside: https://a\n",
			"b.yaml": "docker:\n  reg.example/ns:\n    lookaside: https://b\n"}, []string{"a.yaml", "b.yaml", `"reg.example/ns"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			regd := filepath.Join(dir, "registries.d")
			os.Mkdir(regd, 0o755)
			for name, body := range tc.files {
				os.WriteFile(filepath.Join(regd, name), []byte(body), 0o644)
			}
			policy := filepath.Join(dir, "policy.json")
			// A policy that accepts anything reads no registries.d; one that rejects does.
			os.WriteFile(policy, []byte(`{"default":[{"type":"reject"}]}`), 0o644)
			layout := filepath.Join(dir, "layout")
			os.Mkdir(layout, 0o755)
			seedDir := filepath.Join(dir, "seed")
			code, stderr := runGuarded(t, "seed", "pull", "--policy", policy, "--registries.d", regd, "oci:"+layout+":v1", seedDir)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
			}
			for _, s := range tc.says {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q: %s", s, stderr)
				}
			}
			if _, err := os.Lstat(seedDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the pull wrote %s", seedDir)
			}
		})
	}
}

// A command's output and cache directories may be neither one directory nor one inside the
// other: build and depot run refuse them with exit 2 before either is created.
func TestOutputAndCacheDirectoriesApart(t *testing.T) {
	bp, err := testbin.CopyDemo(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// out and cache are relative to a fresh directory; neither exists yet.
		out, cache, says string
	}{
		{"the same", "d", "d", "same directory"},
		{"output inside the cache", "c/out", "c", "holds"},
		{"cache inside the output", "o", "o/cache", "is inside"},
	} {
		for _, cmd := range []string{"build", "depot"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				dir := t.TempDir()
				out, cache := filepath.Join(dir, tc.out), filepath.Join(dir, tc.cache)
				args := []string{"build", bp, "--until", "render"}
				if cmd == "depot" {
					args = []string{"depot", "run", bp}
				}
				code, stderr := runGuarded(t, append(args, "--output-dir", out, "--cache-dir", cache)...)
				if code != exitBadInput || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "cache") {
					t.Errorf("exit %d, want %d saying %q: %s", code, exitBadInput, tc.says, stderr)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("%s holds %d entries after a refusal, want none", dir, len(entries))
				}
			})
		}
	}
}

// An OCI layout's blob is streamed, not capped, but must be a regular file: a chunk blob
// replaced by a FIFO (which blocked the open, out of Ctrl-C's reach) or by a symlink to
// /dev/zero is refused at once, exit 2, naming the blob, and nothing is written. The real
// binary runs under its memory limit, its time bounded by this test's context.
func TestLayoutBlobMustBeRegularFile(t *testing.T) {
	src := hostileSeed(t, nil)
	for _, kind := range []string{"fifo", "/dev/zero"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			layout := filepath.Join(dir, "layout")
			if code, _, stderr := runMain(t, "seed", "push", src, "oci:"+layout+":v1"); code != 0 {
				t.Fatalf("push: exit %d: %s", code, stderr)
			}
			blob := lastChunkBlob(t, layout)
			os.Remove(blob)
			want := hostileSmallFile(t, kind, blob, 0)
			before := listTree(t, layout)
			args := append([]string{"seed", "pull"}, seedTrustFlags(t)...)
			args = append(args, "oci:"+layout+":v1", filepath.Join(dir, "seed"))
			code, _, stderr := runMain(t, args...) // the real binary, bounded by the test's context
			if code != exitBadInput || !strings.Contains(stderr, filepath.Base(blob)) || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d naming %s and %q: %s", code, exitBadInput, blob, want, stderr)
			}
			if after := listTree(t, layout); !slices.Equal(before, after) {
				t.Errorf("the refused pull changed the layout: %v, then %v", before, after)
			}
			// The chunks already fetched are kept to resume from, and the message says where.
			kept, _ := os.ReadDir(filepath.Join(dir, "seed"))
			for _, e := range kept {
				if p := filepath.Join(dir, "seed", e.Name()); !strings.Contains(stderr, p) {
					t.Errorf("the refused pull left %s and does not name it: %s", p, stderr)
				}
			}
		})
	}
}

// lastChunkBlob is the path of the last chunk blob a seed manifest in layout lists.
func lastChunkBlob(t *testing.T, layout string) string {
	t.Helper()
	var index struct{ Manifests []struct{ Digest string } }
	b, _ := os.ReadFile(filepath.Join(layout, "index.json"))
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	path := func(d string) string { return filepath.Join(layout, "blobs", strings.Replace(d, ":", "/", 1)) }
	var m struct {
		Layers []struct{ MediaType, Digest string }
	}
	b, _ = os.ReadFile(path(index.Manifests[0].Digest))
	json.Unmarshal(b, &m)
	last := ""
	for _, l := range m.Layers {
		if strings.Contains(l.MediaType, "chunk") {
			last = l.Digest
		}
	}
	if last == "" {
		t.Fatalf("the seed's manifest lists no chunk: %s", b)
	}
	return path(last)
}

// The site config on a seed boot medium is a small file too, though it is inside an ISO: one
// over its cap is refused before any VM starts, exit 2, naming the medium, the file and the
// cap.
func TestSeedBootMediumSiteConfigOverItsCap(t *testing.T) {
	dir := t.TempDir()
	medium := isotest.Write(t, filepath.Join(dir, "site.iso"), siteconfig.VolumeLabel, map[string]string{
		siteconfig.ConfigFileName: strings.Repeat(" ", siteconfig.MaxFileSize+1),
	})
	seedDir := smallSeed(t, dir)
	// No qemu on the child's PATH: the refusal must come before any VM or disk tool is needed.
	noTools := "PATH=" + t.TempDir()
	before := listTree(t, dir)
	code, _, stderr := runMainWith(t, func(c *exec.Cmd) { c.Env = append(c.Env, noTools) }, "seed", "boot", "--site-config", medium, seedDir)
	if code != exitBadInput {
		t.Errorf("exit %d, want %d: %s", code, exitBadInput, stderr)
	}
	for _, s := range []string{medium, siteconfig.ConfigFileName, fmt.Sprintf("larger than %d bytes", siteconfig.MaxFileSize)} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr does not say %q: %s", s, stderr)
		}
	}
	if after := listTree(t, dir); !slices.Equal(before, after) {
		t.Errorf("the refused boot changed %s: %v, then %v", dir, before, after)
	}
}

// A --policy is checked for its meaning, not only its syntax, whenever it is read: an
// unknown requirement type or a policy without a default is exit 2 naming the file, even
// for a seed directory, to which no policy is applied.
func TestMeaninglessPolicyIsBadInput(t *testing.T) {
	for _, tc := range []struct{ name, policy, says string }{
		{"unknown requirement type", `{"default":[{"type":"acceptEverything"}]}`, `Unknown policy requirement type "acceptEverything"`},
		{"no default", `{"transports":{}}`, "Default policy is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "policy.json")
			os.WriteFile(p, []byte(tc.policy), 0o644)
			seedDir := smallSeed(t, dir)
			for _, args := range [][]string{
				{"seed", "verify", "--policy", p, seedDir},
				{"seed", "inspect", "--policy", p, seedDir},
			} {
				code, stderr := runGuarded(t, args...)
				if code != exitBadInput || !strings.Contains(stderr, p) || !strings.Contains(stderr, tc.says) {
					t.Errorf("%v: exit %d, want %d naming %s and %q: %s", args, code, exitBadInput, p, tc.says, stderr)
				}
			}
		})
	}
}
