package siteconfig

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
	"github.com/snofactory/snofactory/test/testbin"
)

const secret = "c2l0ZTpTSVRFU0VDUkVU" // the auth in testdata/pull-secret.json

func problems(t *testing.T, err error) []strictyaml.Problem {
	t.Helper()
	var ve *strictyaml.ValidationErrors
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		t.Fatalf("want *ValidationErrors with problems, got %T: %v", err, err)
	}
	return ve.Problems
}

func TestExamplesLoad(t *testing.T) {
	for _, p := range []string{"testdata/site.yaml", "testdata/dhcp.yaml", "../../../blueprints/demo/site.yaml"} {
		t.Run(p, func(t *testing.T) {
			if _, err := Load(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadReadsReferencedFiles(t *testing.T) {
	sc, err := Load("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sc.Spec.PullSecret, secret) {
		t.Error("pull secret not read")
	}
	if len(sc.Spec.Manifests) != 1 || sc.Spec.Manifests[0].Name != "store-id.yaml" || !strings.Contains(sc.Spec.Manifests[0].Content, "kind: ConfigMap") {
		t.Errorf("manifests = %+v", sc.Spec.Manifests)
	}
	if d := sc.EffectiveDNS(); len(d.Servers) != 1 || d.Servers[0] != "192.168.50.1" || d.Search[0] != "edge.example.com" {
		t.Errorf("EffectiveDNS from the nmstate dns-resolver = %+v", d)
	}
}

func TestDemoSite(t *testing.T) {
	sc, err := Load("../../../blueprints/demo/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := sc.Spec
	iface := s.Network.Interfaces[0]
	if s.Hostname != "edge-01" || iface.Name != "eth0" || iface.IPv4.Address[0] != (Address{"10.0.2.50", 24}) ||
		s.Network.Routes.Config[0].NextHopAddress != "10.0.2.2" || sc.EffectiveDNS().Servers[0] != "10.0.2.3" {
		t.Errorf("demo site = %+v", s)
	}
}

// write puts a site config and its files into a fresh directory and returns its path.
func write(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"site.yaml":         doc,
		"ps.json":           `{"auths":{"r.example":{"auth":"` + secret + `"}}}`,
		"ps-bad.json":       `{"auths": {"r": "` + secret + `"},,}`,
		"ps-empty.json":     "\n",
		"ps-noauths.json":   `{"auths": {}}`,
		"m/a.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"m2/a.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"bad/x.yaml":        "- not an object\n",
		"notes/readme.txt":  "x",
		"m3/sub/a.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"m4/noname.yaml":    "apiVersion: v1\nkind: ConfigMap\n",
		"single/store.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: store}\n",
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
	return filepath.Join(dir, "site.yaml")
}

const head = "apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata:\n  name: s\nspec:\n  hostname: edge-01\n"

func eth(ipv4 string) string {
	return "  network:\n    interfaces:\n      - name: eth0\n        type: ethernet\n" + ipv4
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name, doc string
		path, msg string
		hint      string
		line, col int
	}{
		{"hostname uppercase", strings.Replace(head, "edge-01", "Edge_01", 1), "spec.hostname", "not an RFC 1123 host name", "", 6, 13},
		{"hostname missing", strings.Replace(head, "  hostname: edge-01\n", "  ntp: {servers: [10.0.2.2]}\n", 1), "spec.hostname", "required", "", 5, 1},
		{"hostname label too long", strings.Replace(head, "edge-01", strings.Repeat("a", 64), 1), "spec.hostname", "not an RFC 1123", "", 6, 13},
		{"name not a label", strings.Replace(head, "name: s", "name: S.1", 1), "metadata.name", "not a DNS-1123 label", "", 4, 9},
		{"kind", strings.Replace(head, "SiteConfig", "Blueprint", 1), "kind", "must be SiteConfig", "", 2, 7},
		{"apiVersion typo", strings.Replace(head, "v1alpha1", "v1alpa1", 1), "apiVersion", "unsupported apiVersion", `did you mean "snofactory.io/v1alpha1"?`, 1, 13},
		{"unknown key typo", head + "  hostnmae: x\n", "spec.hostnmae", "unknown field", `did you mean "hostname"?`, 7, 3},
		{"unknown key misplaced", head + "  prefix-length: 24\n", "spec.prefix-length", "unknown field", "prefix-length belongs under spec.network.interfaces[].ipv4.address[]", 7, 3},
		{"cluster name without domain", head + "  clusterName: store\n", "spec.clusterName", "go together", "", 7, 16},
		{"base domain invalid", head + "  clusterName: store\n  baseDomain: -x.example\n", "spec.baseDomain", "not a DNS subdomain", "", 8, 15},
		{"bad IPv4", head + eth("        ipv4:\n          address:\n            - {ip: 10.0.2.500, prefix-length: 24}\n"), "spec.network.interfaces[0].ipv4.address[0].ip", "not an IP address", "", 13, 20},
		{"CIDR in ip", head + eth("        ipv4:\n          address:\n            - {ip: 10.0.2.5/24, prefix-length: 24}\n"), "spec.network.interfaces[0].ipv4.address[0].ip", "not an IP address", "the prefix goes in prefix-length", 13, 20},
		{"prefix too long", head + eth("        ipv4:\n          address:\n            - {ip: 10.0.2.5, prefix-length: 33}\n"), "spec.network.interfaces[0].ipv4.address[0].prefix-length", "between 1 and 32", "", 13, 45},
		{"prefix missing", head + eth("        ipv4:\n          address:\n            - {ip: 10.0.2.5}\n"), "spec.network.interfaces[0].ipv4.address[0].prefix-length", "between 1 and 32", "", 13, 15},
		{"IPv6 under ipv4", head + eth("        ipv4:\n          address:\n            - {ip: 'fd00::5', prefix-length: 64}\n"), "spec.network.interfaces[0].ipv4.address[0].ip", "not an IPv4 address", "put it under ipv6", 13, 20},
		{"prefix 128 ok for v6 only", head + eth("        ipv6:\n          address:\n            - {ip: 'fd00::5', prefix-length: 129}\n"), "spec.network.interfaces[0].ipv6.address[0].prefix-length", "between 1 and 128", "", 13, 46},
		{"disabled with address", head + eth("        ipv4:\n          enabled: false\n          dhcp: true\n"), "spec.network.interfaces[0].ipv4.enabled", "is false", "", 12, 20},
		{"bridge type", head + "  network:\n    interfaces:\n      - name: br0\n        type: linux-bridge\n", "spec.network.interfaces[0].type", `interface type "linux-bridge" is not supported by the reconfiguration hook in this version`, "supported: ethernet, bond, vlan", 10, 15},
		{"bond without its block", head + "  network:\n    interfaces:\n      - name: bond0\n        type: bond\n", "spec.network.interfaces[0]", "a bond needs link-aggregation", "mode: active-backup", 9, 9},
		{"vlan without its block", head + "  network:\n    interfaces:\n      - name: eth0.10\n        type: vlan\n", "spec.network.interfaces[0]", "a VLAN needs its vlan block", "base-iface", 9, 9},
		{"bond settings on an ethernet", head + eth("        link-aggregation:\n          mode: active-backup\n"), "spec.network.interfaces[0].link-aggregation", "belongs to an interface of type bond", "type: bond", 12, 11},
		{"OVS database", head + "  network:\n    ovs-db: {}\n", "spec.network.ovs-db", "OVS not supported by the reconfiguration hook", "", 8, 5},
		{"route rules", head + "  network:\n    route-rules: {}\n", "spec.network.route-rules", "route rules not supported", "", 8, 5},
		{"IPv4 autoconf", head + eth("        ipv4:\n          autoconf: true\n"), "spec.network.interfaces[0].ipv4.autoconf", "not allowed for IPv4", "", 12, 21},
		{"other nmstate setting", head + eth("        lldp: {enabled: true}\n"), "spec.network.interfaces[0].lldp", `the nmstate setting "lldp" not supported`, "", 11, 9},
		{"state absent", head + eth("        state: absent\n"), "spec.network.interfaces[0].state", "not one of up, down", "", 11, 16},
		{"interface twice", head + eth("      - name: eth0\n        type: ethernet\n"), "spec.network.interfaces[1].name", "listed twice", "", 11, 15},
		{"interface name too long", head + "  network:\n    interfaces:\n      - name: averyveryverylongname\n        type: ethernet\n", "spec.network.interfaces[0].name", "not a Linux interface name", "", 9, 15},
		{"route host bits", head + eth("") + "    routes:\n      config:\n        - {destination: 10.0.2.1/24, next-hop-address: 10.0.2.2}\n", "spec.network.routes.config[0].destination", "host bits", `did you mean 10.0.2.0/24?`, 13, 25},
		{"route unknown interface", head + eth("") + "    routes:\n      config:\n        - {destination: 0.0.0.0/0, next-hop-interface: eth1}\n", "spec.network.routes.config[0].next-hop-interface", `no interface "eth1"`, "", 13, 56},
		{"route family", head + eth("") + "    routes:\n      config:\n        - {destination: 0.0.0.0/0, next-hop-address: 'fd00::1'}\n", "spec.network.routes.config[0].next-hop-address", "address family", "", 13, 54},
		{"DNS server not an IP", head + "  dns:\n    servers: [dns.example.com]\n", "spec.dns.servers[0]", "not an IP address", "", 8, 15},
		{"DNS conflict", head + "  network:\n    dns-resolver:\n      config:\n        server: [10.0.2.3]\n  dns:\n    servers: [10.0.2.4]\n", "spec.dns", "conflicts with spec.network.dns-resolver", "give DNS in one place", 12, 5},
		{"NTP server", head + "  ntp:\n    servers: ['not a host']\n", "spec.ntp.servers[0]", "neither an IP address nor a host name", "", 8, 15},
		{"pull secret missing", head + "  pullSecretFile: nope.json\n", "spec.pullSecretFile", "cannot read the pull secret nope.json", "", 7, 19},
		{"pull secret not JSON", head + "  pullSecretFile: ps-bad.json\n", "spec.pullSecretFile", "not valid JSON", "", 7, 19},
		{"pull secret pasted", head + "  pullSecretFile: '{\"auths\": {}}'\n", "spec.pullSecretFile", "must name a file", "", 7, 19},
		// Every form of an empty pull secret is refused, as lifecycle-agent's createPullSecretFile
		// and the installer's ImagePullSecret refuse it.
		{"pull secret empty string", head + "  pullSecret: \"\"\n", "spec.pullSecret", "the pull secret is empty", `{"auths"`, 7, 15},
		{"pull secret no value", head + "  pullSecret:\n", "spec.pullSecret", "the pull secret is empty", "", 7, 14},
		{"pull secret blank", head + "  pullSecret: '  '\n", "spec.pullSecret", "the pull secret is empty", "", 7, 15},
		{"pull secret empty object", head + "  pullSecret: '{}'\n", "spec.pullSecret", `has no "auths" object`, "", 7, 15},
		{"pull secret empty auths", head + "  pullSecret: '{\"auths\":{}}'\n", "spec.pullSecret", `"auths" is empty`, "", 7, 15},
		{"pull secret registry without auth", head + "  pullSecret: '{\"auths\":{\"r.example\":{\"email\":\"a@b\"}}}'\n", "spec.pullSecret", `registry "r.example" has neither "auth" nor "credsStore"`, "", 7, 15},
		{"pull secret file empty", head + "  pullSecretFile: ps-empty.json\n", "spec.pullSecretFile", "ps-empty.json: the pull secret is empty", "", 7, 19},
		{"pull secret file empty auths", head + "  pullSecretFile: ps-noauths.json\n", "spec.pullSecretFile", `"auths" is empty`, "", 7, 19},
		{"pull secret file named empty", head + "  pullSecretFile: ''\n", "spec.pullSecretFile", "names no file", "", 7, 19},
		{"mirror with tag", head + "  registryMirrors:\n    - source: quay.io/a/b:1\n      mirrors: [r.example/b]\n", "spec.registryMirrors[0].source", "carries a tag or digest", "", 8, 15},
		{"mirror without mirrors", head + "  registryMirrors:\n    - source: quay.io/a/b\n", "spec.registryMirrors[0].mirrors", "at least one mirror", "", 8, 7},
		{"ssh key", head + "  sshAuthorizedKeys: [not-a-key]\n", "spec.sshAuthorizedKeys[0]", "not an SSH public key", "", 7, 23},
		{"manifests missing", head + "  extraManifests: [nope]\n", "spec.extraManifests[0]", "no such file", "", 7, 20},
		{"manifest not an object", head + "  extraManifests: [bad]\n", "spec.extraManifests", "x.yaml:1:1: a manifest is a mapping, got a list", "", 7, 19},
		{"manifest without name", head + "  extraManifests: [m4]\n", "spec.extraManifests", "noname.yaml:1:1: manifest lacks metadata.name", "", 7, 19},
		{"manifest stray file", head + "  extraManifests: [notes]\n", "spec.extraManifests[0]", "readme.txt is not a manifest", "", 7, 20},
		{"manifest subdirectory", head + "  extraManifests: [m3]\n", "spec.extraManifests[0]", "sub is not a manifest", "", 7, 20},
		{"manifests named twice", head + "  extraManifests: [m, m2]\n", "spec.extraManifests", "two manifests are named a.yaml", "", 7, 19},
		{"string got list", head + "  clusterName: [a]\n", "spec.clusterName", "expected a string", "", 7, 16},
		{"duplicate key", head + "  hostname: edge-02\n", "spec.hostname", "duplicate key", "", 7, 3},
		{"label key prefix", head + "  nodeLabels:\n    Site/zone: a\n", "spec.nodeLabels.Site/zone", `label key "Site/zone" has a prefix that is not a lowercase DNS subdomain`, "site.example.com/zone", 8, 16},
		{"label key name", head + "  nodeLabels:\n    site.example.com/-zone: a\n", "spec.nodeLabels.site.example.com/-zone", "has no valid name", "", 8, 29},
		{"label value", head + "  nodeLabels:\n    zone: 'a b'\n", "spec.nodeLabels.zone", `label value "a b" is not valid`, "or empty", 8, 11},
		{"trust bundle not PEM", head + "  additionalTrustBundle: 'not a cert'\n", "spec.additionalTrustBundle", "certificate 1: text that is no PEM block", "BEGIN CERTIFICATE", 7, 26},
		{"trust bundle with a key", head + "  additionalTrustBundle: |\n    -----BEGIN PRIVATE KEY-----\n    AAAA\n    -----END PRIVATE KEY-----\n", "spec.additionalTrustBundle", "certificate 1 is a PEM PRIVATE KEY", "", 7, 26},
		{"binding seed", head + "  binding: {seed: Du_Edge}\n", "spec.binding.seed", "not a seed name", "du-edge", 7, 19},
		{"binding serial with a newline", head + "  binding: {machineSerial: \"CZ\\n1\"}\n", "spec.binding.machineSerial", "not a serial number", "dmidecode", 7, 28},
		{"binding serial too long", head + "  binding: {machineSerial: " + strings.Repeat("A", 65) + "}\n", "spec.binding.machineSerial", "at most 64", "", 7, 28},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.doc)
			_, err := Load(path)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line != tc.line || p.Col != tc.col || !strings.Contains(p.Hint, tc.hint) || p.File != path {
						t.Errorf("got %v, want %d:%d and hint ...%s...", p, tc.line, tc.col, tc.hint)
					}
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the pull secret is in the error: %v", err)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
		})
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	doc := strings.Replace(head, "edge-01", "EDGE", 1) + eth("        ipv4:\n          address:\n            - {ip: 1.2.3, prefix-length: 0}\n") + "  ntpp: {}\n"
	ps := problems(t, func() error { _, err := Load(write(t, doc)); return err }())
	if len(ps) != 4 {
		t.Errorf("want 4 problems (hostname, ip, prefix-length, ntpp), got\n%v", &strictyaml.ValidationErrors{Problems: ps})
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Line < ps[i-1].Line {
			t.Errorf("problems not in file order:\n%v", &strictyaml.ValidationErrors{Problems: ps})
		}
	}
}

func TestMediumRoundTrip(t *testing.T) {
	sc, err := Load("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "site.iso")
	if err := Write(context.Background(), sc, iso); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(iso)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("medium with a pull secret has mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := ReadMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sc.Normalized()
	again, _ := got.Normalized()
	if string(want) != string(again) {
		t.Errorf("round trip changed the site config:\n%s\nwant\n%s", again, want)
	}
	if got.Spec.PullSecret != sc.Spec.PullSecret || got.Spec.PullSecretFile != "" || len(got.Spec.Manifests) != 1 || got.Dir() != "" {
		t.Errorf("medium's config not self-contained as expected: %+v", got.Spec)
	}
	idms, err := ImageDigestMirrorSet("site-mirrors", got.Spec.RegistryMirrors)
	if err != nil || !strings.Contains(string(idms), "kind: ImageDigestMirrorSet") || !strings.Contains(string(idms), "- registry.store-0042.example:5000/ocp-release") {
		t.Errorf("ImageDigestMirrorSet = %s, %v", idms, err)
	}
}

// TestMediumLabelWithXorriso: xorriso, an independent ISO 9660 implementation, reads the
// volume label and finds the config file.
func TestMediumLabelWithXorriso(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	sc, err := Load("../../../blueprints/demo/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "site.iso")
	if err := Write(context.Background(), sc, iso); err != nil {
		t.Fatal(err)
	}
	// 0600 even without a pull secret: a medium can carry keys and the password hash.
	if fi, _ := os.Stat(iso); fi.Mode().Perm() != 0o600 {
		t.Errorf("medium without a pull secret has mode %v, want 0600", fi.Mode().Perm())
	}
	out, err := exec.Command("xorriso", "-indev", iso, "-pvd_info", "-find", "/", "-type", "f").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Volume Id    : "+VolumeLabel+"\n") {
		t.Errorf("xorriso does not see volume id %s:\n%s", VolumeLabel, out)
	}
	if !strings.Contains(strings.ToLower(string(out)), "/"+ConfigFileName) {
		t.Errorf("xorriso does not list /%s:\n%s", ConfigFileName, out)
	}
}

func TestReadMediumRefuses(t *testing.T) {
	dir := t.TempDir()
	notISO := filepath.Join(dir, "x.iso")
	if err := os.WriteFile(notISO, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMedium(notISO); err == nil || !strings.Contains(err.Error(), "not an ISO 9660 image") {
		t.Errorf("zeros: %v", err)
	}
	if _, err := ReadMedium(filepath.Join(dir, "missing.iso")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if err := Write(context.Background(), &SiteConfig{}, dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Write over a directory: %v", err)
	}
}

// TestMediumMustBeSelfContained: a medium's config that references files is refused; it
// would read files of the node, not of the site.
func TestMediumMustBeSelfContained(t *testing.T) {
	_, err := Parse([]byte(head+"  pullSecretFile: /etc/x.json\n"), "site.iso:"+ConfigFileName, "")
	ps := problems(t, err)
	if ps[0].Path != "spec.pullSecretFile" || !strings.Contains(ps[0].Message, "file references are not allowed") || ps[0].Line != 7 {
		t.Errorf("got %v", err)
	}
}
