package stages

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/precache"
)

func loadBlueprint(t *testing.T, spec string) *blueprints.Blueprint {
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

func TestRegistryHosts(t *testing.T) {
	for ref, want := range map[string]bool{
		"127.0.0.1:5000/a:1":  true,
		"localhost/a:1":       true,
		"localhost:5000/a:1":  true,
		"[::1]:5000/a:1":      true,
		"quay.io/a:1":         false,
		"10.0.0.1:5000/a:1":   false,
		"busybox:latest":      false,
		"library/busybox:1.0": false,
	} {
		got := isLoopback(registryHost(ref))
		if got != want {
			t.Errorf("%s: loopback=%v, want %v", ref, got, want)
		}
	}
}

func TestReleaseVersion(t *testing.T) {
	for ref, want := range map[string]string{
		"quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64": "4.16.12",
		"registry.example:5000/ocp/release:4.18":                   "4.18",
		"quay.io/ocp/release@sha256:" + strings.Repeat("a", 64):    "",
		"quay.io/ocp/release:latest":                               "",
	} {
		got, err := releaseVersion(ref)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%s: %q, %v; want %q", ref, got, err, want)
		}
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
`)
	o, err := RenderOptions(bp)
	if err != nil {
		t.Fatal(err)
	}
	if o.OpenShift.Version != "" || o.InstallerFrom != "resolve/bin/openshift-install" {
		t.Errorf("version %q, installer from %q", o.OpenShift.Version, o.InstallerFrom)
	}
	cn := o.OpenShift.ClusterNetwork
	if len(cn) != 2 || cn[0].HostPrefix != 23 || cn[1].HostPrefix != 64 || cn[1].CIDR != "fd01::/48" {
		t.Errorf("cluster networks: %+v", cn)
	}
	if _, _, err := Graph(bp, Options{}); err != nil {
		t.Fatalf("graph: %v", err)
	}
}
