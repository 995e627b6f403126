package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline"
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
			// Stands in for the resolve stage extracting openshift-install from the release.
			return exec.CommandContext(ctx, "cp", "-a", standInDir, filepath.Join(env.Out, "bin")).Run()
		},
	}
	frags, host := writeFragments(t, "variant: openshift\nversion: 4.16.0\nstorage:\n  files:\n    - path: /etc/a\n      mode: 0644\n      contents: {inline: a}\n")
	o := clusterOptions(t)
	o.InstallerPath = ""
	o.InstallerFrom = "resolve/bin/openshift-install"
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
	if rec.Stages[1].Tools["openshift-install"] != "4.16.0" {
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
	want := []string{"auth/kubeadmin-password", "auth/kubeconfig", ConfigPath, "manifests/install-config.yaml", "manifests/mine.yaml", "metadata.json", "render.json"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the second render: %v, want %v", got, want)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatal(err)
	}
}
