package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v32types "github.com/coreos/ignition/v2/config/v3_2/types"
	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/vincent-petithory/dataurl"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/test/testbin"
)

var update = flag.Bool("update", false, "rewrite golden files")

func clusterOptions(t *testing.T) Options {
	c := goodCluster()
	c.MachineNetwork = []string{"192.168.127.0/24"}
	c.Mirrors = []Mirror{{Source: "quay.io/openshift-release-dev/ocp-release", Mirrors: []string{"mirror.factory.local:5000/ocp/release"}}}
	return Options{
		Target:        oskind.OpenShift,
		OpenShift:     c,
		SSHKey:        true,
		InstallerPath: standIn(t),
		Relocation:    &Relocation{InternalIP: "192.168.127.10/24"},
	}
}

// The install-config is typed: it matches the golden file and parses back to the same value.
func TestInstallConfigGolden(t *testing.T) {
	o := clusterOptions(t)
	ic := installConfig(o.OpenShift, redacted, redacted)
	got, err := marshalYAML(ic)
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/golden/install-config.yaml"
	if *update {
		if err := writeFile(".", golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := mustRead(t, golden); !bytes.Equal(got, want) {
		t.Fatalf("install-config.yaml differs from %s (go test -update to accept):\n%s", golden, got)
	}
	var back InstallConfig
	dec := yaml.NewDecoder(bytes.NewReader(got))
	dec.KnownFields(true)
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ic) {
		t.Fatalf("parsed back:\n%+v\nwant\n%+v", back, ic)
	}
	// The parts a single-node bootstrap-in-place install needs, as the installer checks them.
	if ic.ControlPlane.Replicas != 1 || ic.Compute[0].Replicas != 0 || ic.BootstrapInPlace.InstallationDisk != "/dev/vda" ||
		ic.Platform.None == nil || ic.Networking.NetworkType != "OVNKubernetes" || ic.APIVersion != "v1" {
		t.Fatalf("not a single-node bootstrap-in-place config: %+v", ic)
	}
}

// Every pod network keeps its own host prefix: a dual-stack cluster needs /23 for IPv4 and
// /64 for IPv6 in the same install-config, and an unset prefix takes the family's default.
// fips: true in the blueprint is the installer's types.InstallConfig FIPS in the file, and
// what render hands the seal for the seed's record; without it the key is absent.
func TestInstallConfigFIPS(t *testing.T) {
	for _, fips := range []bool{false, true} {
		c := goodCluster()
		c.FIPS = fips
		c.MachineNetwork = []string{"192.168.127.0/24", "fd00:127::/64"}
		raw, err := marshalYAML(installConfig(c, redacted, redacted))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if v, ok := doc["fips"]; ok != fips || (fips && v != true) {
			t.Errorf("fips %v: install-config has fips %v (%v)\n%s", fips, v, ok, raw)
		}
		r := clusterReport(installConfig(c, "", ""))
		if r.FIPS != fips || !reflect.DeepEqual(r.MachineNetwork, c.MachineNetwork) {
			t.Errorf("fips %v: cluster report %+v", fips, r)
		}
	}
}

// A blueprint's proxy is the installer's types.Proxy in the file, under the installer's
// keys, and what render hands the seal; without one the key is absent.
func TestInstallConfigProxy(t *testing.T) {
	p := &Proxy{HTTPProxy: "http://proxy.factory.example:3128", HTTPSProxy: "https://10.0.0.9:3129", NoProxy: ".factory.example,10.0.0.0/8"}
	for _, proxy := range []*Proxy{nil, p} {
		c := goodCluster()
		c.Proxy = proxy
		raw, err := marshalYAML(installConfig(c, redacted, redacted))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Proxy map[string]string `yaml:"proxy"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		want := map[string]string(nil)
		if proxy != nil {
			want = map[string]string{"httpProxy": p.HTTPProxy, "httpsProxy": p.HTTPSProxy, "noProxy": p.NoProxy}
		}
		if !reflect.DeepEqual(doc.Proxy, want) {
			t.Errorf("install-config proxy %v, want %v\n%s", doc.Proxy, want, raw)
		}
		rec := record(&Report{Target: oskind.OpenShift, Cluster: clusterReport(installConfig(c, "", ""))})
		if rec.Proxy != (proxy != nil) {
			t.Errorf("proxy %v: render hands the seal proxy %v", proxy != nil, rec.Proxy)
		}
	}
}

func TestInstallConfigClusterNetworks(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []ClusterNetwork
		want []ClusterNetworkEntry
	}{
		{"default", nil, []ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}}},
		{"dual stack", []ClusterNetwork{{CIDR: "10.128.0.0/14", HostPrefix: 23}, {CIDR: "fd01::/48", HostPrefix: 64}},
			[]ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}, {CIDR: "fd01::/48", HostPrefix: 64}}},
		{"own prefixes", []ClusterNetwork{{CIDR: "10.132.0.0/14", HostPrefix: 24}, {CIDR: "fd02::/56", HostPrefix: 60}},
			[]ClusterNetworkEntry{{CIDR: "10.132.0.0/14", HostPrefix: 24}, {CIDR: "fd02::/56", HostPrefix: 60}}},
		{"family defaults", []ClusterNetwork{{CIDR: "10.128.0.0/14"}, {CIDR: "fd01::/48"}},
			[]ClusterNetworkEntry{{CIDR: "10.128.0.0/14", HostPrefix: 23}, {CIDR: "fd01::/48", HostPrefix: 64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goodCluster()
			c.ClusterNetwork = tc.in
			raw, err := marshalYAML(installConfig(c, redacted, redacted))
			if err != nil {
				t.Fatal(err)
			}
			// Read the YAML back as the installer would, not our struct.
			var doc struct {
				Networking struct {
					ClusterNetwork []ClusterNetworkEntry `yaml:"clusterNetwork"`
				} `yaml:"networking"`
			}
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(doc.Networking.ClusterNetwork, tc.want) {
				t.Fatalf("clusterNetwork = %+v, want %+v\n%s", doc.Networking.ClusterNetwork, tc.want, raw)
			}
		})
	}
}

// The whole openshift path against the recorded openshift-install stand-in (a script that
// replays the real installer's output formats; the real binary cannot run here).
func TestOpenShiftRender(t *testing.T) {
	// A TMPDIR of our own, to see that the installer's work directory (which holds the real
	// pull secret) is created there and removed; CI may leave TMPDIR unset.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	o := clusterOptions(t)
	o.WorkerIgnition = true
	// Record the --dir each installer run is given, so the check below cannot pass vacuously.
	record := filepath.Join(t.TempDir(), "installer-args")
	wrapper := filepath.Join(t.TempDir(), "openshift-install")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >>'"+record+"'\nexec '"+o.InstallerPath+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o.InstallerPath = wrapper
	frags, host := writeFragments(t,
		// Its own MachineConfig.
		`variant: openshift
version: 4.16.0
metadata:
  name: 99-master-chrony
  labels:
    machineconfiguration.openshift.io/role: master
storage:
  files:
    - path: /etc/chrony.conf
      mode: 0644
      overwrite: true
      contents: {inline: "server ntp.factory.local iburst\n"}
`,
		// Two without metadata: merged, in order, into one MachineConfig.
		`variant: openshift
version: 4.14.0
storage:
  files:
    - path: /etc/motd
      mode: 0644
      overwrite: true
      contents: {inline: "first\n"}
`,
		`variant: openshift
version: 4.16.0
storage:
  files:
    - path: /etc/motd
      mode: 0644
      overwrite: true
      contents: {inline: "second\n"}
    - path: /etc/snofactory-site
      mode: 0644
      contents: {inline: "depot-7\n"}
`)
	o.Fragments, o.HostFiles = frags, host
	out := renderTo(t, o)
	files := readTree(t, out)

	// config.ign: the installer's bootstrap-in-place config, valid, secret, 0600.
	cfgPath := filepath.Join(out, ConfigPath)
	ign := files[ConfigPath]
	cfg, r, err := v32.Parse(ign)
	if err != nil {
		t.Fatalf("config.ign: %v\n%s", err, r)
	}
	ignitionValidateAllowing(t, cfgPath, "has no install section")
	if st, _ := os.Stat(cfgPath); st.Mode().Perm() != 0o600 {
		t.Errorf("config.ign mode %v, want 0600", st.Mode().Perm())
	}
	if got := embedded(t, cfg, "/root/.docker/config.json"); got != testPullSecret {
		t.Errorf("the installer got pull secret %q", got)
	}
	if !strings.Contains(string(ign), testSSHKey) {
		t.Error("the installer did not get the SSH key")
	}
	// The installer received every manifest render made, in its openshift/ directory.
	wantMCs := []string{"90-master-snofactory-internal-ip", "90-master-snofactory-node-ip", "90-master-snofactory-seal",
		"90-master-snofactory-shipment", "99-master-chrony", "99-master-snofactory-fragments"}
	for _, name := range wantMCs {
		rel := "manifests/" + name + ".yaml"
		if _, ok := files[rel]; !ok {
			t.Errorf("%s missing", rel)
			continue
		}
		if got := embedded(t, cfg, "/opt/openshift/openshift/"+name+".yaml"); got != string(files[rel]) {
			t.Errorf("the installer's openshift/%s.yaml differs from %s", name, rel)
		}
		assertMachineConfig(t, rel, files[rel], "3.4.0")
	}
	if embedded(t, cfg, "/opt/openshift/openshift/99-snofactory-ingresscontroller-default.yaml") == "" {
		t.Error("the IngressController did not reach the installer")
	}

	// The merged fragment MachineConfig: later wins, the rest accumulates.
	mergedCfg := mcConfig(t, files["manifests/99-master-snofactory-fragments.yaml"])
	if got := embeddedFile(t, mergedCfg, "/etc/motd"); got != "second\n" {
		t.Errorf("merged /etc/motd = %q, want the later fragment's", got)
	}
	if got := embeddedFile(t, mergedCfg, "/etc/snofactory-site"); got != "depot-7\n" {
		t.Errorf("merged /etc/snofactory-site = %q", got)
	}

	// install-config.yaml in manifests/ is redacted; the real one is nowhere in the outputs.
	var ic InstallConfig
	if err := yaml.Unmarshal(files["manifests/install-config.yaml"], &ic); err != nil {
		t.Fatal(err)
	}
	if ic.PullSecret != redacted || ic.SSHKey != redacted || ic.Metadata.Name != "sno" {
		t.Errorf("kept install-config: pullSecret %q sshKey %q", ic.PullSecret, ic.SSHKey)
	}
	assertNoSecrets(t, out, "manifests", "render.json", "auth", "metadata.json", "ignition/worker.ign")

	// worker.ign: a pointer to the machine-config server, trusting the cluster root CA.
	wPath := filepath.Join(out, WorkerPath)
	ignitionValidate(t, wPath)
	w, r, err := v32.Parse(files[WorkerPath])
	if err != nil {
		t.Fatalf("worker.ign: %v\n%s", err, r)
	}
	if len(w.Ignition.Config.Merge) != 1 || *w.Ignition.Config.Merge[0].Source != "https://api-int.sno.example.com:22623/config/worker" {
		t.Errorf("worker.ign merges %+v", w.Ignition.Config.Merge)
	}
	ca, err := dataurl.DecodeString(*w.Ignition.Security.TLS.CertificateAuthorities[0].Source)
	if err != nil || !bytes.Equal(ca.Data, mustRead(t, "testdata/openshift-install-standin/recorded/root-ca.crt")) {
		t.Errorf("worker.ign does not trust the cluster root CA (%v)", err)
	}

	// The ingress placement: one replica on the master.
	var ingress IngressController
	if err := yaml.Unmarshal(files["manifests/99-snofactory-ingresscontroller-default.yaml"], &ingress); err != nil {
		t.Fatal(err)
	}
	if ingress.Kind != "IngressController" || ingress.Metadata.Namespace != "openshift-ingress-operator" || ingress.Spec.Replicas != 1 ||
		!reflect.DeepEqual(ingress.Spec.NodePlacement.NodeSelector.MatchLabels, map[string]string{"node-role.kubernetes.io/master": ""}) {
		t.Errorf("IngressController %+v", ingress)
	}

	// Installer outputs kept, credentials 0600.
	for rel, perm := range map[string]os.FileMode{"auth/kubeconfig": 0o600, "auth/kubeadmin-password": 0o600, "metadata.json": 0o644} {
		st, err := os.Stat(filepath.Join(out, rel))
		if err != nil || st.Mode().Perm() != perm {
			t.Errorf("%s: %v mode %v, want %v", rel, err, st.Mode().Perm(), perm)
		}
	}

	// render.json says what was produced.
	var rep Report
	if err := json.Unmarshal(files["render.json"], &rep); err != nil {
		t.Fatal(err)
	}
	if c := rep.Ignition["config"]; !c.Secret || c.Version != "3.2.0" {
		t.Errorf("render.json config %+v", c)
	}
	if rep.Tools["openshift-install"] != standInVersion {
		t.Errorf("render.json tools %v", rep.Tools)
	}
	if rep.Relocation == nil || rep.Relocation.NodeIPHint != "192.168.127.0" || rep.Relocation.KubeletClientCertMinValidity != "720h0m0s" {
		t.Errorf("render.json relocation %+v", rep.Relocation)
	}
	wantOut := []string{"manifests/99-master-chrony.yaml", "manifests/99-master-snofactory-fragments.yaml", "manifests/99-master-snofactory-fragments.yaml"}
	for i, f := range rep.Fragments {
		if f.Output != wantOut[i] {
			t.Errorf("fragment %s went to %s, want %s", f.Name, f.Output, wantOut[i])
		}
	}

	var workDirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, record))), "\n") {
		if _, dir, ok := strings.Cut(line, " --dir "); ok {
			workDirs = append(workDirs, dir)
		}
	}
	if len(workDirs) == 0 {
		t.Fatalf("openshift-install never got a --dir:\n%s", mustRead(t, record))
	}
	for _, dir := range workDirs {
		if filepath.Dir(dir) != tmp {
			t.Errorf("the installer's work directory %s is not in TMPDIR %s", dir, tmp)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the installer's work directory %s (with the real pull secret) was left behind: %v", dir, err)
		}
	}
	left, err := filepath.Glob(filepath.Join(tmp, "snofactory-render-installer-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("installer work directories left in TMPDIR: %v (%v)", left, err)
	}
}

// ignitionValidate for installer output, which carries a known warning of the real installer.
func ignitionValidateAllowing(t *testing.T, path, allowed string) {
	t.Helper()
	out, err := execOutput(testbin.Require(t, "ignition-validate", "ignition"), path)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" && !strings.Contains(line, allowed) {
			t.Fatalf("ignition-validate %s: %v\n%s", path, err, out)
		}
	}
	if err != nil {
		t.Fatalf("ignition-validate %s: %v\n%s", path, err, out)
	}
}

// embedded is the content of the file at path in a parsed 3.2 config, "" when absent.
func embedded(t *testing.T, cfg v32types.Config, path string) string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return embeddedFile(t, raw, path)
}

// embeddedFile is the content of the file at path in an Ignition config of any 3.x spec
// (they all spell storage.files alike), "" when absent.
func embeddedFile(t *testing.T, raw []byte, path string) string {
	t.Helper()
	var cfg ignitionFiles
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path == path && f.Contents.Source != nil {
			d, err := dataurl.DecodeString(*f.Contents.Source)
			if err != nil {
				t.Fatal(err)
			}
			return string(d.Data)
		}
	}
	return ""
}

// mcConfig returns a MachineConfig's spec.config as JSON.
func mcConfig(t *testing.T, doc []byte) []byte {
	t.Helper()
	var mc machineConfig
	if err := yaml.Unmarshal(doc, &mc); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(mc.Spec.Config)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertMachineConfig checks a MachineConfig independently of render's own checker: the
// envelope, and spec.config through the Ignition spec package of the expected version.
func assertMachineConfig(t *testing.T, what string, doc []byte, ignVersion string) []byte {
	t.Helper()
	var mc machineConfig
	if err := yaml.Unmarshal(doc, &mc); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if mc.APIVersion != "machineconfiguration.openshift.io/v1" || mc.Kind != "MachineConfig" || mc.Metadata.Labels[roleLabel] != "master" {
		t.Errorf("%s: envelope %s %s %v", what, mc.APIVersion, mc.Kind, mc.Metadata.Labels)
	}
	raw := mcConfig(t, doc)
	var err error
	switch ignVersion {
	case "3.2.0":
		_, _, err = v32.Parse(raw)
	case "3.4.0":
		_, _, err = v34.Parse(raw)
	case "3.5.0":
		_, _, err = v35.Parse(raw)
	default:
		t.Fatalf("no parser for %s", ignVersion)
	}
	if err != nil {
		t.Errorf("%s: spec.config is not valid Ignition %s: %v", what, ignVersion, err)
	}
	return raw
}

// The relocation MachineConfigs, for releases whose Butane variants emit different Ignition
// specs: each parses as a MachineConfig with a valid spec.config and carries its concern.
func TestRelocationMachineConfigs(t *testing.T) {
	for _, tc := range []struct{ release, variant, ign string }{
		{"4.12", "4.12.0", "3.2.0"},
		{"4.14.7", "4.14.0", "3.4.0"},
		{"4.16", "4.16.0", "3.4.0"},
		{"4.19.1", "4.19.0", "3.5.0"},
	} {
		t.Run(tc.release, func(t *testing.T) {
			variant, err := butaneOpenShiftVersion(tc.release)
			if err != nil || variant != tc.variant {
				t.Fatalf("variant %q (%v), want %s", variant, err, tc.variant)
			}
			mcs, _, err := relocationConfigs(variant, Relocation{InternalIP: "192.168.127.10/24", ShipmentWindow: "240h"})
			if err != nil {
				t.Fatal(err)
			}
			all := map[string]string{}
			placed := map[string]bool{} // every path the configs put on the node
			for _, mc := range mcs {
				doc, err := translateOwn(mc.Config.Metadata.Name, mc.Config, false)
				if err != nil {
					t.Fatal(err)
				}
				if _, v, err := checkMachineConfig(mc.Concern, doc); err != nil || v != tc.ign {
					t.Fatalf("%s: version %s, %v", mc.Concern, v, err)
				}
				raw := assertMachineConfig(t, mc.Concern, doc, tc.ign)
				for _, p := range ignitionPaths(t, raw) {
					placed[p] = true
				}
				if tc.ign <= "3.3.0" {
					p := filepath.Join(t.TempDir(), "spec-config.ign")
					if err := os.WriteFile(p, raw, 0o644); err != nil {
						t.Fatal(err)
					}
					ignitionValidate(t, p)
				}
				all[mc.Concern] = decodedText(t, raw)
			}
			for concern, want := range map[string][]string{
				"internal-ip":         {"/etc/NetworkManager/dispatcher.d/pre-up.d/30-snofactory-internal-ip", "addr=192.168.127.10/24", `[ "$1" = br-ex ]`, `"mode":493`},
				"node-ip":             {"KUBELET_NODEIP_HINT=192.168.127.0", `KUBELET_NODE_IP=192.168.127.10`, "CONTAINER_STREAM_ADDRESS=192.168.127.10", "crio.service", "30-snofactory-node-ip.conf"},
				"seal-service":        {SealUnit, `"enabled":true`, "ConditionPathExists=/dev/disk/by-id/virtio-snofactory-seal", SealScript},
				"kubelet-cert-window": {ShipmentFile, `"kubeletClientCertMinValidity": "240h0m0s"`},
			} {
				for _, w := range want {
					if !strings.Contains(all[concern], w) {
						t.Errorf("%s: %q not found in\n%s", concern, w, all[concern])
					}
				}
			}
			// The reconfiguration unit is the seal's, outside every MachineConfig: a unit the
			// MCO owns and the seal enables would be drift to the machine-config daemon.
			for concern, text := range all {
				if strings.Contains(text, ReconfigureUnit) {
					t.Errorf("%s: the MachineConfig declares %s", concern, ReconfigureUnit)
				}
			}
			// The seal checks these on the node: each must be something a config puts there.
			for _, p := range RelocationFiles() {
				if !placed[p] {
					t.Errorf("RelocationFiles names %s, which no relocation MachineConfig writes (%v)", p, placed)
				}
			}
		})
	}
}

// ignitionPaths are the paths an Ignition config writes: files, and systemd units and
// drop-ins where systemd keeps them.
func ignitionPaths(t *testing.T, raw []byte) []string {
	t.Helper()
	var v struct {
		Storage struct{ Files []struct{ Path string } }
		Systemd struct {
			Units []struct {
				Name    string
				Dropins []struct{ Name string }
			}
		}
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range v.Storage.Files {
		out = append(out, f.Path)
	}
	for _, u := range v.Systemd.Units {
		out = append(out, "/etc/systemd/system/"+u.Name)
		for _, d := range u.Dropins {
			out = append(out, "/etc/systemd/system/"+u.Name+".d/"+d.Name)
		}
	}
	return out
}

// decodedText is an Ignition config's JSON with its data URLs decoded, for content checks.
func decodedText(t *testing.T, raw []byte) string {
	t.Helper()
	var b strings.Builder
	b.Write(raw)
	var v ignitionFiles
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, f := range v.Storage.Files {
		var src, compression string
		if f.Contents.Source != nil {
			src = *f.Contents.Source
		}
		if f.Contents.Compression != nil {
			compression = *f.Contents.Compression
		}
		d, err := dataurl.DecodeString(src)
		if err != nil {
			t.Fatal(err)
		}
		data := d.Data
		switch compression {
		case "":
		case "gzip": // Butane compresses larger inline contents
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if data, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected %s compression", compression)
		}
		b.WriteString("\n")
		b.Write(data)
	}
	return b.String()
}

func TestMissingInstaller(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	o := clusterOptions(t)
	o.InstallerPath = ""
	err := Render(context.Background(), o, testSecrets(t), t.TempDir(), nil)
	if !errors.Is(err, ErrNoInstaller) {
		t.Fatalf("error %v, want ErrNoInstaller", err)
	}
	for _, want := range []string{"openshift-install is not available", "not on PATH", "Put the openshift-install of release 4.16.3 on PATH", "oc adm release extract --command=openshift-install", "resolve stage"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	notExec := filepath.Join(t.TempDir(), "openshift-install")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.InstallerPath = notExec
	err = Render(context.Background(), o, testSecrets(t), t.TempDir(), nil)
	if !errors.Is(err, ErrNoInstaller) || !strings.Contains(err.Error(), "not an executable file") {
		t.Fatalf("non-executable installer: %v", err)
	}

	// A failing installer's fatal line reaches the error.
	failing := filepath.Join(t.TempDir(), "openshift-install")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'level=fatal msg=\"failed to fetch Install Config\"' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o.InstallerPath = failing
	err = Render(context.Background(), o, testSecrets(t), t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), `level=fatal msg="failed to fetch Install Config"`) {
		t.Fatalf("failing installer: %v", err)
	}
}

// Same options, same bytes: two renders produce identical trees.
func TestDeterminism(t *testing.T) {
	frags, host := writeFragments(t, "variant: fcos\nversion: 1.4.0\nstorage:\n  files:\n    - path: /etc/a\n      contents: {inline: a}\n")
	osFrags, osHost := writeFragments(t, "variant: openshift\nversion: 4.16.0\nstorage:\n  files:\n    - path: /etc/a\n      mode: 0644\n      contents: {inline: a}\n")
	o := clusterOptions(t)
	o.WorkerIgnition = true
	o.Fragments, o.HostFiles = osFrags, osHost
	for name, opts := range map[string]Options{
		"coreos":    {Target: oskind.CoreOS, IgnitionVersion: "3.3.0", Fragments: frags, HostFiles: host, SSHKey: true},
		"openshift": o,
	} {
		t.Run(name, func(t *testing.T) {
			a, b := readTree(t, renderTo(t, opts)), readTree(t, renderTo(t, opts))
			if len(a) < 2 {
				t.Fatalf("only %d files", len(a))
			}
			if !reflect.DeepEqual(keys(a), keys(b)) {
				t.Fatalf("file sets differ: %v vs %v", keys(a), keys(b))
			}
			for k := range a {
				if !bytes.Equal(a[k], b[k]) {
					t.Errorf("%s differs between two renders", k)
				}
			}
		})
	}
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sortStrings(k)
	return k
}
