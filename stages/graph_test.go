package stages

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/install"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/stages/render"
	"github.com/snofactory/snofactory/stages/seal"
)

func loadBlueprint(t *testing.T, spec string) *v1alpha1.Blueprint {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"live.iso":              "stand-in",
		"net/eth0.nmconnection": "[connection]\nid=eth0\ntype=ethernet\n",
		"policy.json":           `{"default": [{"type": "reject"}]}`,
		"pull-secret.json":      `{"auths": {"registry.example": {"auth": "dXNlcjpwYXNz"}}}`,
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o600)
	}
	p := filepath.Join(dir, "bp.yaml")
	os.WriteFile(p, []byte("apiVersion: snofactory.io/v1alpha1\nkind: Blueprint\nmetadata:\n  name: t\nspec:\n"+spec), 0o644)
	bp, err := blueprints.LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return bp
}

func TestGraphMapsBlueprint(t *testing.T) {
	bp := loadBlueprint(t, `  target:
    type: coreos
  source:
    path: live.iso
  liveISO:
    kernelArguments:
      append: [console=ttyS0]
      delete: [quiet]
    networkKeyfiles: [net/eth0.nmconnection]
  signaturePolicyFile: policy.json
  extraImages:
    - 127.0.0.1:5000/a/b:1
    - quay.io/c/d:2
`)
	g, _, err := Graph(bp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range g.Stages {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "resolve render live-iso precache install validate seal publish" {
		t.Fatalf("stages: %s", got)
	}
	iso := g.Stages[2].Options.(liveiso.StageOptions)
	if !slices.Equal(iso.KargsAppend, []string{"console=ttyS0"}) || !slices.Equal(iso.KargsDelete, []string{"quiet"}) ||
		iso.NetworkKeyfiles["eth0.nmconnection"] != filepath.Join(bp.Dir(), "net", "eth0.nmconnection") || iso.ISOPath != bp.Resolved.ISO {
		t.Errorf("live-iso options: %+v", iso)
	}
	if g.Stages[2].Files["network/eth0.nmconnection"] == "" {
		t.Errorf("the keyfile's content is not keyed: %v", g.Stages[2].Files)
	}
	pc := g.Stages[3].Options.(precache.Options)
	if pc.Registry.PolicyFile != filepath.Join(bp.Dir(), "policy.json") || !slices.Equal(pc.Registry.Insecure, []string{"127.0.0.1:5000"}) {
		t.Errorf("precache registry: %+v", pc.Registry)
	}
}

// A release pinned by digest builds: render takes the version from the lock. Each cluster
// network keeps its own host prefix (dual stack).
func TestRenderOptionsOpenShift(t *testing.T) {
	bp := loadBlueprint(t, `  target:
    type: openshift
  openshift:
    releaseImage: quay.io/openshift-release-dev/ocp-release@sha256:`+strings.Repeat("a", 64)+`
    baseDomain: example.com
    pullSecretFile: pull-secret.json
    clusterNetwork:
      - cidr: 10.128.0.0/14
        hostPrefix: 23
      - cidr: fd01::/48
        hostPrefix: 64
    serviceNetwork: [172.30.0.0/16, fd02::/112]
    fips: true
    proxy:
      httpProxy: http://proxy.factory.example:3128
      noProxy: .factory.example
`)
	o := renderOptions(bp)
	if !o.OpenShift.FIPS {
		t.Error("the blueprint's fips did not reach render")
	}
	if p := o.OpenShift.Proxy; p == nil || *p != (render.Proxy{HTTPProxy: "http://proxy.factory.example:3128", NoProxy: ".factory.example"}) {
		t.Errorf("the blueprint's proxy reached render as %+v", p)
	}
	if o.OpenShift.Version != "" || !o.FromResolve {
		t.Errorf("version %q, from resolve %v", o.OpenShift.Version, o.FromResolve)
	}
	cn := o.OpenShift.ClusterNetwork
	if len(cn) != 2 || cn[0].HostPrefix != 23 || cn[1].HostPrefix != 64 || cn[1].CIDR != "fd01::/48" {
		t.Errorf("cluster networks: %+v", cn)
	}
	g, _, err := Graph(bp, Options{Agent: "/usr/bin/snofactory"})
	if err != nil {
		t.Fatalf("graph: %v", err)
	}
	// The node's agent travels on the data disk; the install and validate stages run.
	if a := g.Stages[3].Options.(precache.Options).Agent; a != "/usr/bin/snofactory" {
		t.Errorf("precache agent = %q", a)
	}
	for _, s := range g.Stages[4:6] {
		if s.Unavailable != "" || s.Run == nil {
			t.Errorf("%s is unavailable for OpenShift: %q", s.Name, s.Unavailable)
		}
	}
	// A conformance OS carries its agent: no copy on the data disk.
	co, _, err := Graph(loadBlueprint(t, "  target:\n    type: coreos\n  source:\n    path: live.iso\n"), Options{Agent: "/usr/bin/snofactory"})
	if err != nil {
		t.Fatal(err)
	}
	if a := co.Stages[3].Options.(precache.Options).Agent; a != "" {
		t.Errorf("coreos precache agent = %q, want none", a)
	}
}

// A local ISO a make target builds is allowed to be missing when the graph is made: plan
// shows every stage, and the stages that read the ISO fail with the command that builds it.
func TestMissingISOFailsOnlyTheStagesThatReadIt(t *testing.T) {
	bp := loadBlueprint(t, `  target:
    type: coreos
  source:
    path: not-built.iso
    generatedBy: make conformance-iso
`)
	g, _, err := Graph(bp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		s := g.Stages[i]
		if s.Files["live.iso"] != "" {
			t.Errorf("%s keys the missing ISO: %v", s.Name, s.Files)
		}
		err := s.Run(context.Background(), &pipeline.Env{})
		if err == nil || !strings.Contains(err.Error(), "make conformance-iso") {
			t.Errorf("%s: %v, want the command that builds the ISO", s.Name, err)
		}
	}
}

// SOURCE_DATE_EPOCH shapes the install's file system and the seal's times, so it is in
// those stages' options: builds with other values get other keys and recipes, and no
// other stage changes.
func TestSourceDateEpochKeysInstallAndSeal(t *testing.T) {
	bp := loadBlueprint(t, `  target:
    type: coreos
  source:
    path: live.iso
`)
	options := func(epoch string) map[string]any {
		t.Setenv("SOURCE_DATE_EPOCH", epoch)
		g, _, err := Graph(bp, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]any{}
		for _, s := range g.Stages {
			out[s.Name] = s.Options
		}
		return out
	}
	a, b := options("1700000000"), options("1800000000")
	for name, o := range a {
		changed := !reflect.DeepEqual(o, b[name])
		if want := name == "install" || name == "seal"; changed != want {
			t.Errorf("stage %s: options changed with SOURCE_DATE_EPOCH: %v, want %v", name, changed, want)
		}
	}
	if got := a["install"].(install.Options).SourceDateEpoch; got != "1700000000" {
		t.Errorf("install's SourceDateEpoch = %q", got)
	}
	if got := b["seal"].(seal.Options).SourceDateEpoch; got != "1800000000" {
		t.Errorf("seal's SourceDateEpoch = %q", got)
	}
}

// The container-storage partition's start is placed on the factory disk before render: -40G
// of a 120GiB disk starts at 80GiB; no block, no partition.
func TestRenderOptionsContainerStorage(t *testing.T) {
	const base = `  target:
    type: openshift
  openshift:
    releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64
    baseDomain: example.com
    pullSecretFile: pull-secret.json
`
	o := renderOptions(loadBlueprint(t, base+"  disk:\n    containerStorage: {}\n"))
	want := render.ContainerStorage{StartMiB: 80 * 1024, Label: "var-lib-containers", Number: 5}
	if cs := o.OpenShift.ContainerStorage; cs == nil || *cs != want {
		t.Errorf("containerStorage = %+v, want %+v", cs, want)
	}
	if cs := renderOptions(loadBlueprint(t, base)).OpenShift.ContainerStorage; cs != nil {
		t.Errorf("no block gives %+v", cs)
	}
}
