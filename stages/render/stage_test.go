package render

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/test/check"
)

// The openshift stage under the real engine, taking openshift-install from an upstream
// stage's output the way the resolve stage will provide it.
func TestOpenShiftStageInEngine(t *testing.T) {
	standInDir := filepath.Dir(standIn(t))
	resolve := pipeline.Stage{
		Name:    "resolve",
		Version: "test",
		Options: map[string]string{"installer": "recorded stand-in"},
		Run: func(ctx context.Context, env *pipeline.Env) error {
			// Stands in for the resolve stage extracting openshift-install from the release
			// and pinning the release in its lock.
			if err := exec.CommandContext(ctx, "cp", "-a", standInDir, filepath.Join(env.Out, "bin")).Run(); err != nil {
				return err
			}
			lock := `{"schemaVersion":1,"arch":"x86_64","release":{"ref":"127.0.0.1:5000/ocp/release:4.16.0","digest":"sha256:` + strings.Repeat("5e", 32) + `","version":"4.16.0"},"images":[]}`
			if err := os.WriteFile(filepath.Join(env.Out, "lock.json"), []byte(lock), 0o644); err != nil {
				return err
			}
			return handoff.Write(env, handoff.Resolve{Lock: "lock.json", Installer: "bin/openshift-install"})
		},
	}
	frags, host := writeFragments(t, "variant: openshift\nversion: 4.16.0\nstorage:\n  files:\n    - path: /etc/a\n      mode: 0644\n      contents: {inline: a}\n")
	o := clusterOptions(t)
	o.InstallerPath = ""
	o.FromResolve = true
	o.Fragments, o.HostFiles = frags, host
	s := New(o)

	if !slices.Equal(s.Deps, []string{"resolve"}) || !slices.Equal(s.Secrets, []string{SecretPullSecret, SecretSSHKey}) {
		t.Fatalf("deps %v secrets %v", s.Deps, s.Secrets)
	}
	if s.Files["butane/a.bu"] != host["butane/a.bu"] {
		t.Fatalf("files %v", s.Files)
	}
	// The keyed options hold labels, never host paths or secrets.
	kj, err := json.Marshal(s.Options)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{host["butane/a.bu"], filepath.Dir(host["butane/a.bu"]), testPullSecret, "canary"} {
		if strings.Contains(string(kj), leak) {
			t.Fatalf("options JSON contains %q: %s", leak, kj)
		}
	}

	g := &pipeline.Graph{Blueprint: "sno", Stages: []pipeline.Stage{resolve, s}}
	cache := &pipeline.Cache{Dir: t.TempDir()}
	outDir := t.TempDir()
	rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: outDir, Secrets: testSecrets(t)})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	e, ok, err := cache.Lookup(Name, rec.Stages[1].Key)
	if err != nil || !ok {
		t.Fatalf("no render entry: %v", err)
	}
	ignitionValidateAllowing(t, filepath.Join(e.Dir, ConfigPath), "has no install section")
	if rec.Stages[1].Tools["openshift-install"] != standInVersion {
		t.Errorf("run record tools %v", rec.Stages[1].Tools)
	}
	assertNoSecrets(t, e.Dir, "manifests", "render.json")
	assertNoSecrets(t, outDir, ".") // run.json and the stage logs
	// The relocation subnet became the machine network.
	var ic InstallConfig
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(e.Dir, "manifests/install-config.yaml")), &ic); err != nil {
		t.Fatal(err)
	}
	if len(ic.Networking.MachineNetwork) != 1 || ic.Networking.MachineNetwork[0].CIDR != "192.168.127.0/24" {
		t.Errorf("machineNetwork %+v", ic.Networking.MachineNetwork)
	}
}

// Rendering again into the same directory replaces the previous outputs and nothing else.
func TestRenderReplacesPreviousOutputs(t *testing.T) {
	out := t.TempDir()
	keep := filepath.Join(out, "manifests", "mine.yaml")
	if err := writeFile(out, "manifests/mine.yaml", []byte("kind: Mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := clusterOptions(t)
	o.WorkerIgnition = true
	o.OpenShift.MachineNetwork = nil
	if err := Render(context.Background(), o, testSecrets(t), out, nil); err != nil {
		t.Fatal(err)
	}
	o.WorkerIgnition = false
	o.Relocation = nil
	if err := Render(context.Background(), o, testSecrets(t), out, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range readTree(t, out) {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"auth/kubeadmin-password", "auth/kubeconfig", ConfigPath, "manifests/" + PhasesMachineConfig + ".yaml", "manifests/install-config.yaml", "manifests/mine.yaml", "metadata.json", "render.json"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the second render: %v, want %v", got, want)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal(err)
	}
}

// With the resolve stage's lock.json upstream, the installer is told to install the locked
// release pinned by digest (a tag can move between resolve and render), and an empty
// openshift.version is the lock's release version.
func TestOpenShiftReleaseFromLock(t *testing.T) {
	const (
		digest = "sha256:5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e5e1e"
		tagRef = "127.0.0.1:5000/ocp/release:4.16.3-x86_64"
		pinned = "127.0.0.1:5000/ocp/release@" + digest
	)
	for _, tc := range []struct {
		name    string
		version string // Options' openshift.version
		lock    string // lock.json; "" writes none
		image   string // the override the installer must get
		variant string // the MachineConfigs' Ignition spec
		from    string
		wantErr string
		wantVer string
		release string // Options' releaseImage
	}{
		{name: "explicit version, pinned by the lock", version: "4.16.3", release: tagRef,
			lock:  `{"schemaVersion":1,"release":{"ref":"` + tagRef + `","digest":"` + digest + `","version":"4.16.3"},"images":[]}`,
			image: pinned, variant: "3.4.0", from: "lock", wantVer: "4.16.3"},
		{name: "version from the lock", version: "", release: tagRef,
			lock:  `{"schemaVersion":1,"release":{"ref":"` + tagRef + `","digest":"` + digest + `","version":"4.16.0-synthetic"}}`,
			image: pinned, variant: "3.4.0", from: "lock", wantVer: "4.16.0"},
		{name: "locked by digest already", version: "", release: pinned,
			lock:  `{"schemaVersion":1,"release":{"ref":"` + pinned + `","digest":"` + digest + `","version":"4.16.3"}}`,
			image: pinned, variant: "3.4.0", from: "lock", wantVer: "4.16.3"},
		{name: "resolve recorded no lock", version: "4.16.3", release: tagRef, wantErr: "the resolve stage recorded no lock"},
		{name: "version disagrees with the lock", version: "4.15", release: tagRef,
			lock:    `{"schemaVersion":1,"release":{"ref":"` + tagRef + `","digest":"` + digest + `","version":"4.16.3"}}`,
			wantErr: "openshift.version 4.15 does not match the locked release"},
		{name: "lock without a digest", version: "4.16.3",
			lock:    `{"schemaVersion":1,"release":{"ref":"` + tagRef + `","digest":"latest","version":"4.16.3"}}`,
			wantErr: "pins no release"},
		{name: "lock without a version", version: "",
			lock:    `{"schemaVersion":1,"release":{"ref":"` + tagRef + `","digest":"` + digest + `"}}`,
			wantErr: "has no x.y[.z] release version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := clusterOptions(t)
			o.InstallerPath = ""
			o.FromResolve = true
			o.OpenShift.Version = tc.version
			o.OpenShift.ReleaseImage = tc.release
			if err := o.validate(); err != nil {
				t.Fatalf("validate: %v", err)
			}
			out, err := buildWithResolve(t, o, tc.lock)
			if check.Error(t, err, tc.wantErr) {
				return
			}
			// What the installer got, as it wrote it into the bootstrap config.
			cfg, r, err := v32.Parse(mustRead(t, filepath.Join(out, ConfigPath)))
			if err != nil {
				t.Fatalf("config.ign: %v\n%s", err, r)
			}
			script := embedded(t, cfg, "/usr/local/bin/release-image.sh")
			if !strings.Contains(script, "\nRELEASE_IMAGE="+tc.image+"\n") {
				t.Errorf("the installer installs:\n%s\nwant %s", script, tc.image)
			}
			var rep Report
			if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
				t.Fatal(err)
			}
			if want := (ReleaseReport{Image: tc.image, Version: tc.wantVer, From: tc.from}); rep.Release == nil || *rep.Release != want {
				t.Errorf("render.json release %+v, want %+v", rep.Release, want)
			}
			for _, m := range rep.Manifests {
				if m.Kind == "MachineConfig" && m.IgnitionVersion != tc.variant {
					t.Errorf("%s is Ignition %s, want %s (the release's Butane variant)", m.Path, m.IgnitionVersion, tc.variant)
				}
			}
		})
	}
}

// buildWithResolve runs render under the engine after a stand-in resolve stage whose output
// holds openshift-install and, unless lock is "", lock.json; it returns render's output.
func buildWithResolve(t *testing.T, o Options, lock string) (string, error) {
	t.Helper()
	standInDir := filepath.Dir(standIn(t))
	resolve := pipeline.Stage{
		Name:    "resolve",
		Version: "test",
		Options: map[string]string{"lock": lock},
		Run: func(ctx context.Context, env *pipeline.Env) error {
			if err := exec.CommandContext(ctx, "cp", "-a", standInDir, filepath.Join(env.Out, "bin")).Run(); err != nil {
				return err
			}
			rec := handoff.Resolve{Installer: "bin/openshift-install"}
			if lock != "" {
				rec.Lock = "lock.json"
				if err := os.WriteFile(filepath.Join(env.Out, "lock.json"), []byte(lock), 0o644); err != nil {
					return err
				}
			}
			return handoff.Write(env, rec)
		},
	}
	g := &pipeline.Graph{Blueprint: "sno", Stages: []pipeline.Stage{resolve, New(o)}}
	cache := &pipeline.Cache{Dir: t.TempDir()}
	rec, err := pipeline.Build(context.Background(), g, pipeline.BuildOptions{Cache: cache, OutputDir: t.TempDir(), Secrets: testSecrets(t)})
	if err != nil {
		return "", err
	}
	e, ok, err := cache.Lookup(Name, rec.Stages[1].Key)
	if err != nil || !ok {
		t.Fatalf("no render entry: %v", err)
	}
	return e.Dir, nil
}

// Without the engine, Render logs the installer's output line by line, including a last line
// without a newline (where a failing tool usually says why).
func TestRenderLogsInstallerOutput(t *testing.T) {
	installer := filepath.Join(t.TempDir(), "openshift-install")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = version ]; then exec '" + standIn(t) + "' version; fi\n" +
		"echo 'level=info msg=\"Consuming Install Config from target directory\"' >&2\n" +
		"printf 'level=fatal msg=\"failed to fetch Master Machines\"' >&2\n" +
		"exit 3\n"
	if err := os.WriteFile(installer, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := clusterOptions(t)
	o.InstallerPath = installer
	var logged strings.Builder
	log := slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err := Render(context.Background(), o, testSecrets(t), t.TempDir(), log)
	if err == nil || !strings.Contains(err.Error(), "openshift-install create") {
		t.Fatalf("error %v, want the failing openshift-install run", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Tool  string `json:"tool"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec.Level == "DEBUG" && rec.Tool == installer {
			lines = append(lines, rec.Msg)
		}
	}
	// `version` writes its lines to render's own buffer, not the log; its warning (an
	// installer from the installer image knows no release architecture, installer
	// pkg/version ReleaseArchitecture) goes to stderr and is logged.
	want := []string{
		`level=warning msg="Release Image Architecture not detected. Release Image Architecture is unknown"`,
		`level=info msg="Consuming Install Config from target directory"`,
		`level=fatal msg="failed to fetch Master Machines"`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("the installer's logged lines:\n%q\nwant\n%q", lines, want)
	}
}

// Without the engine there is no lock: an empty version is an error naming what is missing.
func TestRenderEmptyVersionWithoutEngine(t *testing.T) {
	for _, fromResolve := range []bool{false, true} {
		o := clusterOptions(t)
		o.FromResolve = fromResolve
		o.OpenShift.Version = ""
		err := Render(context.Background(), o, testSecrets(t), t.TempDir(), nil)
		const want = "openshift.version is empty and there is no resolve stage output whose lock could supply it"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("fromResolve %v: error %v, want one containing %q", fromResolve, err, want)
		}
	}
}
