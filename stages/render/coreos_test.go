package render

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v33 "github.com/coreos/ignition/v2/config/v3_3"
	v33types "github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

func fileContents(t *testing.T, cfg v33types.Config, path string) (string, bool) {
	t.Helper()
	for _, f := range cfg.Storage.Files {
		if f.Path == path {
			if f.Contents.Source == nil {
				return "", true
			}
			d, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return string(d.Data), true
		}
	}
	return "", false
}

func unit(cfg v33types.Config, name string) (v33types.Unit, bool) {
	for _, u := range cfg.Systemd.Units {
		if u.Name == name {
			return u, true
		}
	}
	return v33types.Unit{}, false
}

func parse33(t *testing.T, path string) v33types.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, r, err := v33.Parse(b)
	if err != nil || len(r.Entries) > 0 {
		t.Fatalf("%s does not parse as Ignition 3.3.0: %v\n%s", path, err, r)
	}
	return cfg
}

// Fragments merge in order: a later fragment's file or unit replaces an earlier one's, and
// everything else accumulates; snofactory's agent comes first so fragments can override it.
func TestCoreOSFragmentMergeOrder(t *testing.T) {
	frags, host := writeFragments(t,
		`variant: fcos
version: 1.4.0
storage:
  files:
    - path: /etc/motd
      contents: {inline: "first\n"}
    - path: /etc/first
      contents: {inline: "1\n"}
systemd:
  units:
    - name: demo.service
      contents: "[Service]\nExecStart=/bin/echo first\n"
`,
		// An older fcos (Ignition 3.2.0) is translated up into the target's 3.3.0.
		`variant: fcos
version: 1.3.0
storage:
  files:
    - path: /etc/motd
      overwrite: true
      contents: {inline: "second\n"}
    - path: /etc/second
      contents: {inline: "2\n"}
`)
	frags = append(frags, Fragment{Inline: `variant: fcos
version: 1.4.0
storage:
  files:
    - path: /etc/motd
      overwrite: true
      contents: {inline: "third\n"}
systemd:
  units:
    - name: demo.service
      contents: "[Service]\nExecStart=/bin/echo third\n"
`})
	out := renderTo(t, Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", Fragments: frags, HostFiles: host})
	cfgPath := filepath.Join(out, ConfigPath)
	cfg := parse33(t, cfgPath)
	ignitionValidate(t, cfgPath)

	for path, want := range map[string]string{"/etc/motd": "third\n", "/etc/first": "1\n", "/etc/second": "2\n"} {
		got, ok := fileContents(t, cfg, path)
		if !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", path, got, ok, want)
		}
	}
	if n := strings.Count(string(mustRead(t, cfgPath)), `"path":"/etc/motd"`); n != 1 {
		t.Errorf("/etc/motd appears %d times, want 1 (merged)", n)
	}
	demo, ok := unit(cfg, "demo.service")
	if !ok || demo.Contents == nil || !strings.Contains(*demo.Contents, "echo third") {
		t.Errorf("demo.service = %+v, want the third fragment's", demo)
	}
	agentUnit, ok := unit(cfg, AgentUnit)
	if !ok || agentUnit.Enabled == nil || !*agentUnit.Enabled || agentUnit.Contents == nil {
		t.Fatalf("%s = %+v, want an enabled unit with contents", AgentUnit, agentUnit)
	}
	checkAgentExecStart(t, *agentUnit.Contents)

	var rep Report
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range rep.Fragments {
		names = append(names, f.Name+"@"+f.Version)
	}
	if got := strings.Join(names, ","); got != "butane/a.bu@1.4.0,butane/b.bu@1.3.0,fragments[2] (inline)@1.4.0" {
		t.Errorf("render.json fragments = %s", got)
	}
	if c := rep.Ignition["config"]; c.Version != "3.3.0" || c.Path != ConfigPath || c.Secret {
		t.Errorf("render.json config = %+v", c)
	}
	// Private even without an SSH key: a fragment may carry secrets render cannot see.
	if st, _ := os.Stat(cfgPath); st.Mode().Perm() != 0o600 {
		t.Errorf("config.ign mode %v, want 0600", st.Mode().Perm())
	}
}

// Every Ignition version the coreos target can emit comes out in that version; the ones
// Debian's ignition accepts also pass ignition-validate.
func TestCoreOSVersions(t *testing.T) {
	for _, v := range []string{"3.2.0", "3.3.0", "3.4.0", "3.5.0"} {
		t.Run(v, func(t *testing.T) {
			out := renderTo(t, Options{Target: oskind.CoreOS, IgnitionVersion: v, SSHKey: true})
			p := filepath.Join(out, ConfigPath)
			b := mustRead(t, p)
			got, err := configVersion(b)
			if err != nil || got != v {
				t.Fatalf("config version %q (%v), want %s", got, err, v)
			}
			if _, _, err := validateIgnition(p, b, true); err != nil {
				t.Fatal(err)
			}
			if v <= "3.3.0" {
				ignitionValidate(t, p)
			}
			if !strings.Contains(string(b), testSSHKey) {
				t.Error("the SSH key is not in the core user's keys")
			}
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
				t.Errorf("config with an SSH key has mode %v, want 0600", st.Mode().Perm())
			}
			assertNoSecrets(t, out, "render.json")
		})
	}
}

// The stage runs under the real engine: outputs land in the cache and a second build hits.
func TestCoreOSStageInEngine(t *testing.T) {
	frags, host := writeFragments(t, "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: /etc/hello\n      contents: {inline: hi}\n")
	g := &pipeline.Graph{Blueprint: "demo", Stages: []pipeline.Stage{New(Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", Fragments: frags, HostFiles: host})}}
	cache := &pipeline.Cache{Dir: t.TempDir()}
	var dirs []string
	for i := 0; i < 2; i++ {
		rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: t.TempDir()})
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		if want := []string{"miss", "hit"}[i]; rec.Stages[0].Cache != want {
			t.Fatalf("build %d: cache %s, want %s", i, rec.Stages[0].Cache, want)
		}
		e, ok, err := cache.Lookup(Name, rec.Stages[0].Key)
		if err != nil || !ok {
			t.Fatalf("no cache entry: %v", err)
		}
		dirs = append(dirs, e.Dir)
		ignitionValidate(t, filepath.Join(e.Dir, ConfigPath))
	}
	// Changing a fragment's content changes the key.
	if err := os.WriteFile(host["butane/a.bu"], []byte("variant: fcos\nversion: 1.4.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: t.TempDir()})
	if err != nil || rec.Stages[0].Cache != "miss" {
		t.Fatalf("after editing the fragment: %v, cache %s", err, rec.Stages[0].Cache)
	}
}

// Options the graph filled in inconsistently are refused before anything runs, and a value
// render cannot use fails the step that needs it. (The values a user writes are validated by
// the blueprint loader, with positions; see blueprints' TestValidationRules.)
func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no target", Options{}, `target ""`},
		{"relocation on coreos", Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", Relocation: &Relocation{}}, "relocation: relocation MachineConfigs need the openshift target"},
		{"worker on coreos", Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", WorkerIgnition: true}, "workerIgnition"},
		{"no cluster", Options{Target: oskind.OpenShift}, "openshift: required"},
		{"fragment no host path", Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", Fragments: []Fragment{{File: "a.bu"}}}, `file "a.bu" has no host path`},
		{"unknown ignition spec", Options{Target: oskind.CoreOS, IgnitionVersion: "3.9.0"}, `ignition spec "3.9.0": want one of 3.2.0, 3.3.0, 3.4.0, 3.5.0`},
		{"unknown release", Options{Target: oskind.OpenShift, OpenShift: &OpenShift{Version: "4.99", ClusterName: "sno", BaseDomain: "x", InstallationDisk: "/dev/vda"}}, "no openshift 4.99.0 variant"},
		{"not a release version", Options{Target: oskind.OpenShift, OpenShift: &OpenShift{Version: "latest", ClusterName: "sno", BaseDomain: "x", InstallationDisk: "/dev/vda"}}, "want an OpenShift 4 release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Render(context.Background(), tc.opts, testSecrets(t), t.TempDir(), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func goodCluster() *OpenShift {
	return &OpenShift{Version: "4.16.3", ClusterName: "sno", BaseDomain: "example.com", InstallationDisk: "/dev/vda"}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertNoSecrets fails if a secret value (or a recognisable piece of it) is in any of the
// given output paths (files, or directories walked).
func assertNoSecrets(t *testing.T, out string, paths ...string) {
	t.Helper()
	needles := []string{testPullSecret, "c25vZmFjdG9yeS10ZXN0OnB1bGwtc2VjcmV0LWNhbmFyeQ", "canary@example.com", "AAAAC3NzaC1lZDI1NTE5AAAAIHNub2ZhY3RvcnktdGVzdC1zc2gta2V5LWNhbmFyeQ"}
	for _, rel := range paths {
		p := filepath.Join(out, rel)
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		files := map[string][]byte{rel: nil}
		if st.IsDir() {
			files = map[string][]byte{}
			for k, v := range readTree(t, p) {
				files[rel+"/"+k] = v
			}
		} else {
			files[rel] = mustRead(t, p)
		}
		for name, b := range files {
			for _, n := range needles {
				if strings.Contains(string(b), n) {
					t.Errorf("%s contains secret material %q", name, n)
				}
			}
		}
	}
}

// checkAgentExecStart parses the agent unit's ExecStart as the agent's own command line
// would and checks it sends the protocol's final message, so the factory host sees the end
// of the install rather than a report the agent rejects.
func checkAgentExecStart(t *testing.T, contents string) {
	t.Helper()
	var execStart string
	for _, line := range strings.Split(contents, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	args := strings.Fields(execStart)
	if len(args) < 3 || args[0] != AgentBinary || args[1] != "agent" || args[2] != "report" {
		t.Fatalf("ExecStart = %q, want %s agent report ...", execStart, AgentBinary)
	}
	flags := map[string]string{}
	for i := 3; i+1 < len(args); i += 2 {
		flags[args[i]] = args[i+1]
	}
	m := wire.Message{Phase: flags["--phase"], Status: wire.Status(flags["--status"])}
	if m.Phase != wire.PhaseBootComplete || m.Status != wire.StatusOK || !m.Status.Valid() || !m.Final() {
		t.Errorf("ExecStart = %q: phase %q status %q, want %s %s (a final message)", execStart, m.Phase, m.Status, wire.PhaseBootComplete, wire.StatusOK)
	}
}
