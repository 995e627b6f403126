package blueprints

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
)

const fakeSecret = "SUPERSECRET-TOKEN-do-not-print"

// fixtureDir is a blueprint directory holding every file the test blueprints reference.
func fixtureDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"live.iso":               "not really an ISO\n",
		"pull-secret.json":       `{"auths":{"registry.example":{"auth":"` + fakeSecret + `"}}}`,
		"frag.bu":                "variant: fcos\nversion: 1.4.0\n",
		"id.pub":                 "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI test@example\n",
		"not-a-key.pub":          "-----BEGIN OPENSSH PRIVATE KEY-----\n" + fakeSecret + "\n",
		"manifests/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n",
		"manifests/b.json":       `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "y"}}`,
		"empty/.keep":            "",
		"badm/a.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n- not a mapping\n",
		"badm2/a.yaml":           "kind: [\n",
		"badm3/sub/a.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"secrets/syntax":         `{"auths": {"r": {"auth": "` + fakeSecret + `"}},, }`,
		"secrets/truncated":      `{"auths": {"r": {"auth": "` + fakeSecret,
		"secrets/array":          `["` + fakeSecret + `"]`,
		"secrets/noauths":        `{"registries": {"r": "` + fakeSecret + `"}}`,
		"secrets/authsarray":     `{"auths": ["` + fakeSecret + `"]}`,
		"secrets/authsempty":     `{"auths": {}, "x": "` + fakeSecret + `"}`,
		"secrets/badchar":        fakeSecret,
		"net/eth0.nmconnection":  "[connection]\nid=eth0\ntype=ethernet\n",
		"net2/eth0.nmconnection": "[connection]\nid=eth0\ntype=ethernet\n",
		"policy.json":            `{"default": [{"type": "insecureAcceptAnything"}]}`,
		"policy-bad.json":        `{"default": [`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const coreosBase = `apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: test
spec:
  target:
    type: coreos
  source:
    path: live.iso
`

const openshiftBase = `apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: test
spec:
  target:
    type: openshift
  openshift:
    releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64
    baseDomain: example.com
    pullSecretFile: pull-secret.json
`

// coreos and openshift append YAML under spec (coreos) or spec.openshift (openshift).
func coreos(extra string) string    { return coreosBase + extra }
func openshift(extra string) string { return openshiftBase + extra }

func parseIn(t *testing.T, dir, doc string) (*v1alpha1.Blueprint, error) {
	t.Helper()
	return Parse([]byte(doc), filepath.Join(dir, "blueprint.yaml"))
}

func TestDefaults(t *testing.T) {
	dir := fixtureDir(t)
	co, err := parseIn(t, dir, coreos(""))
	if err != nil {
		t.Fatal(err)
	}
	os, err := parseIn(t, dir, openshift(""))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"coreos ignitionVersion", co.Spec.Target.IgnitionVersion, "3.3.0"},
		{"openshift ignitionVersion left to the installer", os.Spec.Target.IgnitionVersion, ""},
		{"coreos cpus", co.Spec.VM.CPUs, 2},
		{"openshift cpus", os.Spec.VM.CPUs, 8},
		{"coreos memory", co.Spec.VM.Memory, 1 * v1alpha1.GiB},
		{"openshift memory", os.Spec.VM.Memory, 16 * v1alpha1.GiB},
		{"coreos disk", co.Spec.VM.DiskSize, 8 * v1alpha1.GiB},
		{"openshift disk", os.Spec.VM.DiskSize, 120 * v1alpha1.GiB},
		{"firmware", co.Spec.VM.Firmware, "bios"},
		{"accelerator", co.Spec.VM.Accelerator, "auto"},
		{"boot timeout", co.Spec.VM.Timeouts.Boot.D(), 10 * time.Minute},
		{"install timeout", co.Spec.VM.Timeouts.Install.D(), 30 * time.Minute},
		{"cluster timeout", co.Spec.VM.Timeouts.Cluster.D(), 2 * time.Hour},
		{"shutdown timeout", co.Spec.VM.Timeouts.Shutdown.D(), 5 * time.Minute},
		{"node IP", co.Spec.Relocation.NodeIP, "192.168.127.10/24"},
		{"kubelet validity", co.Spec.Relocation.KubeletCertValidity.D(), 24 * time.Hour},
		{"formats", strings.Join(co.Spec.Outputs.Formats, ","), "chunked"},
		{"compression", co.Spec.Outputs.Compression, "zstd"},
		{"cluster name", os.Spec.OpenShift.ClusterName, "test"},
		{"cluster network", os.Spec.OpenShift.ClusterNetwork[0], v1alpha1.ClusterNetwork{CIDR: "10.128.0.0/14", HostPrefix: 23}},
		{"service network", strings.Join(os.Spec.OpenShift.ServiceNetwork, ","), "172.30.0.0/16"},
		{"machine network", os.Spec.OpenShift.MachineNetwork[0].CIDR, "192.168.127.0/24"},
		{"install disk", os.Spec.OpenShift.InstallDisk, "/dev/vda"},
		{"control plane", *os.Spec.OpenShift.ControlPlane.Replicas, 1},
		{"compute", os.Spec.OpenShift.Compute.Replicas, 0},
		{"worker ignition", os.Spec.OpenShift.WorkerIgnition, false},
		{"no openshift on coreos", co.Spec.OpenShift == nil, true},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Default is idempotent and keeps what the user set.
	before := *co
	co.Default()
	if co.Spec.VM.Memory != before.Spec.VM.Memory || !reflect.DeepEqual(co.Spec.Relocation, before.Spec.Relocation) {
		t.Error("Default is not idempotent")
	}
	set, err := parseIn(t, dir, coreos("  vm:\n    memory: 3000\n    diskSize: 3GiB\n  relocation:\n    kubeletCertValidity: 2d12h\n"))
	if err != nil {
		t.Fatal(err)
	}
	if set.Spec.VM.Memory != 3000*v1alpha1.MiB || set.Spec.VM.DiskSize != 3*v1alpha1.GiB ||
		set.Spec.Relocation.KubeletCertValidity.D() != 60*time.Hour {
		t.Errorf("user values overridden: %+v %+v", set.Spec.VM, set.Spec.Relocation)
	}
}

// TestValidationRules has one case per rule: the problem's path and a piece of its message.
func TestValidationRules(t *testing.T) {
	dir := fixtureDir(t)
	tests := []struct {
		name, doc, path, msg string
	}{
		{"apiVersion missing", strings.Replace(coreos(""), "apiVersion: snofactory.io/v1alpha1\n", "", 1), "apiVersion", "required"},
		{"apiVersion not a string", strings.Replace(coreos(""), "apiVersion: snofactory.io/v1alpha1", "apiVersion: [x]", 1), "apiVersion", "expected a string"},
		{"kind", strings.Replace(coreos(""), "kind: Blueprint", "kind: Machine", 1), "kind", "must be Blueprint"},
		{"name required", strings.Replace(coreos(""), "name: test", "name: \"\"", 1), "metadata.name", "required"},
		{"name too long", strings.Replace(coreos(""), "name: test", "name: "+strings.Repeat("a", 64), 1), "metadata.name", "DNS-1123"},
		{"label key", strings.Replace(coreos(""), "  name: test\n", "  name: test\n  labels:\n    \"bad key!\": x\n", 1), "metadata.labels.bad key!", "invalid label key"},
		{"label prefix", strings.Replace(coreos(""), "  name: test\n", "  name: test\n  labels:\n    Bad_Prefix/key: x\n", 1), "metadata.labels.Bad_Prefix/key", "prefix"},
		{"target type enum", strings.Replace(coreos(""), "type: coreos", "type: rhel", 1), "spec.target.type", "not one of"},
		{"ignition version enum", strings.Replace(coreos(""), "type: coreos", "type: coreos\n    ignitionVersion: 3.6.0", 1), "spec.target.ignitionVersion", "not one of 3.3.0, 3.4.0, 3.5.0"},
		{"source url not http", strings.Replace(coreos("    sha256: "+strings.Repeat("a", 64)+"\n"), "path: live.iso", "url: file:///tmp/x.iso", 1), "spec.source.url", "not an http(s) URL"},
		{"sha256 uppercase", coreos("    sha256: " + strings.Repeat("A", 64) + "\n"), "spec.source.sha256", "lowercase"},
		{"sha256 prefixed", coreos("    sha256: sha256:" + strings.Repeat("a", 64) + "\n"), "spec.source.sha256", "hexadecimal"},
		{"generatedBy without path", strings.Replace(coreos("    sha256: "+strings.Repeat("a", 64)+"\n    generatedBy: make iso\n"), "path: live.iso", "url: https://example.com/x.iso", 1), "spec.source.generatedBy", "only allowed with path"},
		{"source empty", strings.Replace(coreos(""), "path: live.iso", "sha256: "+strings.Repeat("a", 64), 1), "spec.source", "one of url and path"},
		{"iso is a directory", strings.Replace(coreos(""), "path: live.iso", "path: manifests", 1), "spec.source.path", "not a regular file"},
		{"release image required", strings.Replace(openshift(""), "    releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64\n", "", 1), "spec.openshift.releaseImage", "required"},
		{"release image without tag", strings.Replace(openshift(""), "ocp-release:4.16.12-x86_64", "ocp-release", 1), "spec.openshift.releaseImage", "neither tag nor digest"},
		{"cluster name", openshift("    clusterName: Site_A\n"), "spec.openshift.clusterName", "DNS-1123"},
		{"base domain required", strings.Replace(openshift(""), "    baseDomain: example.com\n", "", 1), "spec.openshift.baseDomain", "required"},
		{"base domain invalid", strings.Replace(openshift(""), "baseDomain: example.com", "baseDomain: Example..com", 1), "spec.openshift.baseDomain", "DNS subdomain"},
		{"pull secret required", strings.Replace(openshift(""), "    pullSecretFile: pull-secret.json\n", "", 1), "spec.openshift.pullSecretFile", "required"},
		{"pull secret is a directory", strings.Replace(openshift(""), "pull-secret.json", "manifests", 1), "spec.openshift.pullSecretFile", "not a regular file"},
		{"ssh inline and file", openshift("    sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI\n    sshPublicKeyFile: id.pub\n"), "spec.openshift.sshPublicKeyFile", "mutually exclusive"},
		{"ssh file missing", openshift("    sshPublicKeyFile: nope.pub\n"), "spec.openshift.sshPublicKeyFile", "does not exist"},
		{"ssh file holds no key", openshift("    sshPublicKeyFile: not-a-key.pub\n"), "spec.openshift.sshPublicKeyFile", "not an SSH public key"},
		{"cluster network cidr", openshift("    clusterNetwork:\n      - cidr: 10.128.0.0\n        hostPrefix: 23\n"), "spec.openshift.clusterNetwork[0].cidr", "not a CIDR"},
		{"host prefix too large", openshift("    clusterNetwork:\n      - cidr: 10.128.0.0/14\n        hostPrefix: 33\n"), "spec.openshift.clusterNetwork[0].hostPrefix", "between 15 and 32"},
		{"ipv4 host prefix on an ipv6 network", openshift("    clusterNetwork:\n      - cidr: 10.128.0.0/14\n        hostPrefix: 23\n      - cidr: fd01::/48\n        hostPrefix: 23\n"), "spec.openshift.clusterNetwork[1].hostPrefix", "between 49 and 128 for fd01::/48, got 23"},
		{"ipv6 host prefix on an ipv4 network", openshift("    clusterNetwork:\n      - cidr: 10.128.0.0/14\n        hostPrefix: 64\n"), "spec.openshift.clusterNetwork[0].hostPrefix", "between 15 and 32 for 10.128.0.0/14, got 64"},
		{"service network invalid", openshift("    serviceNetwork: [nope]\n"), "spec.openshift.serviceNetwork[0]", "not a CIDR"},
		{"machine network invalid", openshift("    machineNetwork:\n      - cidr: 192.168.127.0\n"), "spec.openshift.machineNetwork[0].cidr", "not a CIDR"},
		{"openshift on a coreos target", coreos("  openshift:\n    releaseImage: quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64\n"), "spec.openshift", "only allowed when target.type is openshift"},
		{"mirror source carries a tag", coreos("  registryMirrors:\n    - source: quay.io/a/b:1\n      mirrors: [registry.example:5000/b]\n"), "spec.registryMirrors[0].source", "carries a tag or digest"},
		{"machine networks overlap", openshift("    machineNetwork:\n      - cidr: 10.1.0.0/16\n      - cidr: 10.1.2.0/24\n"), "spec.openshift.machineNetwork[1].cidr", "overlaps"},
		{"node IP inside the service network", openshift("    serviceNetwork: [172.30.0.0/16]\n") + "  relocation:\n    nodeIP: 172.30.5.5/24\n", "spec.relocation.nodeIP", "lies inside spec.openshift.serviceNetwork[0]"},
		{"node IP outside every machine network", openshift("    machineNetwork:\n      - cidr: 10.1.0.0/16\n"), "spec.openshift.machineNetwork", "no machine network contains the internal node IP 192.168.127.10"},
		{"install disk", openshift("    installDisk: vda\n"), "spec.openshift.installDisk", "not a device path"},
		{"karg with a space", coreos("  liveISO:\n    kernelArguments:\n      append: [\"console=ttyS0 quiet\"]\n"), "spec.liveISO.kernelArguments.append[0]", "not one kernel argument"},
		{"empty karg", coreos("  liveISO:\n    kernelArguments:\n      delete: [\"\"]\n"), "spec.liveISO.kernelArguments.delete[0]", "empty kernel argument"},
		{"keyfile name", coreos("  liveISO:\n    networkKeyfiles: [frag.bu]\n"), "spec.liveISO.networkKeyfiles[0]", "not a NetworkManager keyfile"},
		{"keyfile missing", coreos("  liveISO:\n    networkKeyfiles: [net/eth1.nmconnection]\n"), "spec.liveISO.networkKeyfiles[0]", "does not exist"},
		{"keyfile names collide", coreos("  liveISO:\n    networkKeyfiles: [net/eth0.nmconnection, net2/eth0.nmconnection]\n"), "spec.liveISO.networkKeyfiles[1]", "same file name"},
		{"policy not JSON", coreos("  signaturePolicyFile: policy-bad.json\n"), "spec.signaturePolicyFile", "not valid JSON"},
		{"policy missing", coreos("  signaturePolicyFile: nope.json\n"), "spec.signaturePolicyFile", "does not exist"},
		{"extra manifests missing", openshift("    extraManifests: nope\n"), "spec.openshift.extraManifests", "does not exist"},
		{"manifest not a mapping", openshift("    extraManifests: badm\n"), "spec.openshift.extraManifests", "badm/a.yaml:5:1: a manifest is a mapping"},
		{"manifest syntax", openshift("    extraManifests: badm2\n"), "spec.openshift.extraManifests", "badm2/a.yaml: invalid YAML"},
		{"manifest subdirectory", openshift("    extraManifests: badm3\n"), "spec.openshift.extraManifests", "is a directory"},
		{"manifests directory empty", openshift("    extraManifests: empty\n"), "spec.openshift.extraManifests", "holds no manifests"},
		{"operator name required", openshift("    operators:\n      - catalog: registry.example/index:v1\n"), "spec.openshift.operators[0].name", "required"},
		{"operator name invalid", openshift("    operators:\n      - name: PTP\n        catalog: registry.example/index:v1\n"), "spec.openshift.operators[0].name", "not a valid package name"},
		{"operator without source", openshift("    operators:\n      - name: ptp-operator\n"), "spec.openshift.operators[0]", "one of catalog and bundle"},
		{"operator twice", openshift("    operators:\n      - name: ptp-operator\n        catalog: registry.example/index:v1\n      - name: ptp-operator\n        catalog: registry.example/index:v1\n"), "spec.openshift.operators[1].name", "listed twice"},
		{"operator channel with bundle", openshift("    operators:\n      - name: ptp-operator\n        channel: stable\n        bundle: registry.example/ptp-bundle:v1\n"), "spec.openshift.operators[0].channel", "only allowed with catalog"},
		{"operator catalog reference", openshift("    operators:\n      - name: ptp-operator\n        catalog: index\n"), "spec.openshift.operators[0].catalog", "invalid image reference"},
		{"butane empty item", coreos("  butane:\n    - {}\n"), "spec.butane[0]", "one of file and inline"},
		{"butane file and inline", coreos("  butane:\n    - file: frag.bu\n      inline: \"variant: fcos\\nversion: 1.4.0\\n\"\n"), "spec.butane[0].inline", "mutually exclusive"},
		{"extra image twice", coreos("  extraImages:\n    - quay.io/a/b:1\n    - quay.io/a/b:1\n"), "spec.extraImages[1]", "duplicate"},
		{"mirror without mirrors", coreos("  registryMirrors:\n    - source: quay.io/a/b\n"), "spec.registryMirrors[0].mirrors", "at least one mirror"},
		{"mirror source required", coreos("  registryMirrors:\n    - mirrors: [registry.example:5000/b]\n"), "spec.registryMirrors[0].source", "required"},
		{"mirror invalid", coreos("  registryMirrors:\n    - source: quay.io/a/b\n      mirrors: [\"not a repo\"]\n"), "spec.registryMirrors[0].mirrors[0]", "not a repository"},
		{"cpus", coreos("  vm:\n    cpus: 1000\n"), "spec.vm.cpus", "at most 256"},
		{"cpus zero", coreos("  vm:\n    cpus: 0\n"), "spec.vm.cpus", "at least 1"},
		{"host prefix zero", openshift("    clusterNetwork:\n      - cidr: 10.128.0.0/14\n        hostPrefix: 0\n"), "spec.openshift.clusterNetwork[0].hostPrefix", "at least 1"},
		{"cpus huge", coreos("  vm:\n    cpus: 99999999999999999999\n"), "spec.vm.cpus", "expected an integer"},
		{"disk too small", coreos("  vm:\n    diskSize: 512MiB\n"), "spec.vm.diskSize", "at least 1GiB"},
		{"disk not a size", coreos("  vm:\n    diskSize: [1]\n"), "spec.vm.diskSize", "expected a size"},
		{"accelerator", coreos("  vm:\n    accelerator: hvf\n"), "spec.vm.accelerator", "not one of auto, kvm, tcg"},
		{"timeout negative", coreos("  vm:\n    timeouts:\n      shutdown: -5m\n"), "spec.vm.timeouts.shutdown", "invalid duration"},
		{"skip twice", coreos("  validation:\n    skip: [certs.api-serving, certs.api-serving]\n"), "spec.validation.skip[1]", "listed twice"},
		{"skip unknown check", coreos("  validation:\n    skip: [host.image.present]\n"), "spec.validation.skip[0]", "unknown check \"host.image.present\""},
		{"skip reason without skip", coreos("  validation:\n    skip: [host.time.sync]\n    skipReasons:\n      host.time.sync: lab\n      certs.api-serving: renewed\n"), "spec.validation.skipReasons.certs.api-serving", "which skip does not list"},
		{"node IP is a network address", coreos("  relocation:\n    nodeIP: 192.168.127.0/24\n"), "spec.relocation.nodeIP", "network address"},
		{"node IP without prefix", coreos("  relocation:\n    nodeIP: 192.168.127.10\n"), "spec.relocation.nodeIP", "CIDR notation"},
		{"kubelet validity above the signer's 30 days", coreos("  relocation:\n    kubeletCertValidity: 42d\n"), "spec.relocation.kubeletCertValidity", "1008h0m0s is more than any OpenShift signer issues"},
		{"kubelet validity too long", coreos("  relocation:\n    kubeletCertValidity: 400d\n"), "spec.relocation.kubeletCertValidity", "kube-controller-manager signs kubelet certificates for 720h (30 days) at most"},
		{"format twice", coreos("  outputs:\n    formats: [raw, raw]\n"), "spec.outputs.formats[1]", "listed twice"},
		{"push reference", coreos("  outputs:\n    push: \"registry.example:5000/Seeds:x\"\n"), "spec.outputs.push", "invalid image reference"},
		{"butane fcos on openshift", openshift("") + "  butane:\n    - inline: \"variant: fcos\\nversion: 1.4.0\\n\"\n", "spec.butane[0].inline", "cannot configure an OpenShift node"},
		{"push without tag", coreos("  outputs:\n    push: registry.example:5000/seeds/x\n"), "spec.outputs.push", "needs a tag"},
		{"replicas not an integer", openshift("    compute:\n      replicas: none\n"), "spec.openshift.compute.replicas", "expected an integer"},
		{"proxy without a URL", openshift("    proxy:\n      noProxy: .example.com\n"), "spec.openshift.proxy", "must include httpProxy or httpsProxy"},
		{"proxy https for http", openshift("    proxy:\n      httpProxy: https://proxy.example.com:3128\n"), "spec.openshift.proxy.httpProxy", `scheme "https" is not supported: http`},
		{"proxy noProxy wildcard", openshift("    proxy:\n      httpProxy: http://p:3128\n      noProxy: '*.example.com'\n"), "spec.openshift.proxy.noProxy", `entry 0 "*.example.com"`},
		{"proxy credentials", openshift("    proxy:\n      httpsProxy: http://user:" + fakeSecret + "@p:3128\n"), "spec.openshift.proxy.httpsProxy", `"http://<credentials>@p:3128" carries credentials`},
		{"proxy unknown key", openshift("    proxy:\n      http_proxy: http://p:3128\n"), "spec.openshift.proxy.http_proxy", "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, tc.doc)
			if err == nil {
				t.Fatalf("no error for\n%s", tc.doc)
			}
			found := false
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					found = true
					if p.Line < 1 || p.Col < 1 {
						t.Errorf("no position: %v", p)
					}
				}
			}
			if !found {
				t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
			}
		})
	}
}

// TestAccepted covers values that look unusual but are right.
func TestAccepted(t *testing.T) {
	dir := fixtureDir(t)
	for name, doc := range map[string]string{
		"url with sha256":           strings.Replace(coreos("    sha256: "+strings.Repeat("a", 64)+"\n"), "path: live.iso", "url: https://example.com/x.iso", 1),
		"missing ISO built by make": strings.Replace(coreos("    generatedBy: make conformance-iso\n"), "path: live.iso", "path: build/out.iso", 1),
		"mirror to a registry":      coreos("  registryMirrors:\n    - source: quay.io\n      mirrors: [\"registry.example:5000\", localhost/x]\n"),
		"image by digest":           coreos("  extraImages:\n    - quay.io/a/b@sha256:" + strings.Repeat("c", 64) + "\n"),
		"sizes and durations":       coreos("  vm:\n    memory: 2G\n    diskSize: 10240\n    timeouts:\n      boot: 90s\n      install: 1h30m\n"),
		"null sections":             coreos("  vm:\n  outputs:\n  butane:\n"),
		"ipv6 networks":             openshift("    clusterNetwork:\n      - cidr: fd01::/48\n        hostPrefix: 64\n    serviceNetwork: [fd02::/112]\n    machineNetwork:\n      - cidr: fd00::/64\n") + "  relocation:\n    nodeIP: fd00::10/64\n",
		"ssh inline and bundle":     openshift("    sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI x\n    operators:\n      - name: ptp-operator\n        bundle: registry.example/ptp-bundle@sha256:" + strings.Repeat("d", 64) + "\n"),
		"live ISO customization":    coreos("  liveISO:\n    kernelArguments:\n      append: [console=ttyS0, rd.neednet=1]\n      delete: [quiet]\n    networkKeyfiles: [net/eth0.nmconnection]\n  signaturePolicyFile: policy.json\n"),
		"anchors within limits":     coreos("  extraImages: &imgs\n    - quay.io/a/b:1\n  validation:\n    skip: [host.time.sync]\n    skipReasons:\n      host.time.sync: no NTP in the lab\n"),
		"openshift fragment":        openshift("") + "  butane:\n    - inline: |\n        variant: openshift\n        version: 4.16.0\n        metadata:\n          name: 99-x\n          labels:\n            machineconfiguration.openshift.io/role: master\n",
		"fcos fragment file":        coreos("  butane:\n    - file: frag.bu\n"),
		"extra manifests":           openshift("    extraManifests: manifests\n"),
		"factory proxy":             openshift("    proxy:\n      httpProxy: http://proxy.factory.example.com:3128\n      httpsProxy: https://10.0.0.9:3129\n      noProxy: .factory.example.com,10.0.0.0/8,fd00::/64\n"),
		"labels with prefix":        strings.Replace(coreos(""), "  name: test\n", "  name: test\n  labels:\n    ran.openshift.io/wave: \"10\"\n    empty: \"\"\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseIn(t, dir, doc); err != nil {
				t.Errorf("rejected:\n%v", err)
			}
		})
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	dir := fixtureDir(t)
	doc := `apiVersion: snofactory.io/v1alpha1
kind: Blueprint
metadata:
  name: Bad_Name
spec:
  target:
    type: openshift
  openshift:
    releaseImage: busybox
    baseDomain: example.com
    pullSecretFile: secrets/syntax
    serviceNetwork: [172.30.0.1/16]
    compute:
      replicas: 3
  vm:
    cpus: two
    firmwre: uefi
  outputs:
    compression: rar
`
	_, err := parseIn(t, dir, doc)
	ps := problems(t, err)
	want := []string{
		"4:9 metadata.name",
		"9:19 spec.openshift.releaseImage",
		"11:21 spec.openshift.pullSecretFile",
		"12:22 spec.openshift.serviceNetwork[0]",
		"14:17 spec.openshift.compute.replicas",
		"16:11 spec.vm.cpus",
		"17:5 spec.vm.firmwre",
		"19:18 spec.outputs.compression",
	}
	var got []string
	for _, p := range ps {
		got = append(got, strings.Join([]string{itoa(p.Line) + ":" + itoa(p.Col), p.Path}, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s\nfull:\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("Error() has %d lines, want %d", n, len(want))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestDidYouMean(t *testing.T) {
	dir := fixtureDir(t)
	tests := []struct {
		name, doc, hint string
	}{
		{"typo", strings.Replace(coreos(""), "type: coreos", "tpye: coreos", 1), `did you mean "type"?`},
		{"case", strings.Replace(openshift(""), "releaseImage:", "releaseimage:", 1), `did you mean "releaseImage"?`},
		{"snake case", strings.Replace(openshift(""), "releaseImage:", "release_image:", 1), `did you mean "releaseImage"?`},
		{"truncated", strings.Replace(openshift(""), "pullSecretFile:", "pullSecret:", 1), `did you mean "pullSecretFile"?`},
		{"transposition", coreos("  vm:\n    memroy: 1GiB\n"), `did you mean "memory"?`},
		{"misplaced", coreos("  cpus: 2\n"), "cpus belongs under spec.vm"},
		{"nowhere near", coreos("  vm:\n    frobnicate: 1\n"), "valid fields under spec.vm: cpus, memory"},
		{"enum", coreos("  outputs:\n    formats: [qcow]\n"), `did you mean "qcow2"?`},
		{"enum accelerator", coreos("  vm:\n    accelerator: kvn\n"), `did you mean "kvm"?`},
		{"target type", strings.Replace(coreos(""), "type: coreos", "type: OpenShift", 1), `did you mean "openshift"?`},
		{"apiVersion", strings.Replace(coreos(""), "snofactory.io/v1alpha1", "snofactory.io/v1alpha", 1), `did you mean "snofactory.io/v1alpha1"?`},
		{"cidr host bits", openshift("    machineNetwork:\n      - cidr: 10.0.0.5/16\n"), "did you mean 10.0.0.0/16?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, tc.doc)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "hint: "+tc.hint) {
				t.Errorf("want hint %q in\n%v", tc.hint, err)
			}
		})
	}
}

// TestSecretNeverPrinted feeds broken pull secrets and private keys: the messages say what
// is wrong and where, never what the file holds.
func TestSecretNeverPrinted(t *testing.T) {
	dir := fixtureDir(t)
	for _, name := range []string{"syntax", "truncated", "array", "noauths", "authsarray", "authsempty", "badchar"} {
		t.Run(name, func(t *testing.T) {
			_, err := parseIn(t, dir, strings.Replace(openshift(""), "pull-secret.json", "secrets/"+name, 1))
			if err == nil {
				t.Fatal("accepted a bad pull secret")
			}
			msg := err.Error()
			if strings.Contains(msg, "SUPERSECRET") || strings.Contains(msg, "TOKEN") {
				t.Fatalf("secret content in the error: %s", msg)
			}
			if !strings.Contains(msg, "spec.openshift.pullSecretFile") {
				t.Errorf("error does not name the field: %s", msg)
			}
			if name == "syntax" && !strings.Contains(msg, "byte offset") {
				t.Errorf("syntax error without offset: %s", msg)
			}
		})
	}
	_, err := parseIn(t, dir, strings.Replace(openshift(""), "pull-secret.json", `'{"auths":{"r":{"auth":"`+fakeSecret+`"}}}'`, 1))
	if err == nil || strings.Contains(err.Error(), "SUPERSECRET") || !strings.Contains(err.Error(), "not hold the pull secret itself") {
		t.Fatalf("pasted pull secret leaked or accepted: %v", err)
	}
	_, err = parseIn(t, dir, openshift("    sshPublicKeyFile: not-a-key.pub\n"))
	if err == nil || strings.Contains(err.Error(), "SUPERSECRET") {
		t.Fatalf("private key content leaked or accepted: %v", err)
	}
}
