package siteconfig

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// ibiDir writes an image-based installer working directory: image-based-config.yaml and,
// when ic is set, install-config.yaml, as `openshift-install image-based create
// config-image --dir` reads them.
func ibiDir(t *testing.T, ibi, ic string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "image-based-config.yaml"), []byte(ibi), 0o600); err != nil {
		t.Fatal(err)
	}
	if ic != "" {
		if err := os.WriteFile(filepath.Join(dir, installConfigFile), []byte(ic), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "image-based-config.yaml")
}

// The shape the installer's config-template writes, filled in for a site.
const ibiSite = `#
# Note: This is a sample ImageBasedConfig file showing
# which fields are available to aid you in creating your
# own image-based-config.yaml file.
#
apiVersion: v1beta1
kind: ImageBasedConfig
metadata:
  name: store-0042
additionalNTPSources:
  - 0.rhel.pool.ntp.org
  - 1.rhel.pool.ntp.org
hostname: sno-0042.store.example.com
releaseRegistry: quay.io
cluster_id: e6a68c95-ee5c-4edd-9bb1-8141ac3eb348
infra_id: store-0042-sktvm
networkConfig:
  interfaces:
    - name: eth0
      type: ethernet
      state: up
      mac-address: 00:00:00:00:00:00
      ipv4:
        enabled: true
        address:
          - ip: 192.168.122.2
            prefix-length: 23
        dhcp: false
`

const ibiInstallConfig = `apiVersion: v1
baseDomain: store.example.com
compute:
- name: worker
  replicas: 0
controlPlane:
  name: master
  replicas: 1
metadata:
  name: sno-0042
networking:
  networkType: OVNKubernetes
  machineNetwork:
  - cidr: 192.168.122.0/23
platform:
  none: {}
imageDigestSources:
- source: quay.io/openshift-release-dev/ocp-release
  mirrors:
  - registry.store-0042.example:5000/ocp/release
pullSecret: '{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpzZWNyZXQ="}}}'
sshKey: |
  ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl tech@store
`

// An ImageBasedConfig with the install-config.yaml beside it loads as the site config it
// describes: identity, network, NTP, cluster name and domain, pull secret, SSH key,
// mirrors and the extra manifests directory.
func TestLoadImageBasedConfig(t *testing.T) {
	path := ibiDir(t, ibiSite, ibiInstallConfig)
	os.MkdirAll(filepath.Join(filepath.Dir(path), "extra-manifests"), 0o755)
	os.WriteFile(filepath.Join(filepath.Dir(path), "extra-manifests", "ns.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n"), 0o600)
	sc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sc.Spec
	for _, c := range []struct{ field, got, want string }{
		{"name", sc.Metadata.Name, "store-0042"},
		{"hostname", s.Hostname, "sno-0042.store.example.com"},
		{"clusterName", s.ClusterName, "sno-0042"},
		{"baseDomain", s.BaseDomain, "store.example.com"},
		{"clusterID", s.ClusterID, "e6a68c95-ee5c-4edd-9bb1-8141ac3eb348"},
		{"infraID", s.InfraID, "store-0042-sktvm"},
		{"pullSecret", s.PullSecret, `{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpzZWNyZXQ="}}}`},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if s.NTP == nil || !slices.Equal(s.NTP.Servers, []string{"0.rhel.pool.ntp.org", "1.rhel.pool.ntp.org"}) {
		t.Errorf("ntp = %+v", s.NTP)
	}
	if s.Network == nil || len(s.Network.Interfaces) != 1 || s.Network.Interfaces[0].Name != "eth0" {
		t.Errorf("network = %+v", s.Network)
	}
	if len(s.SSHAuthorizedKeys) != 1 || !strings.HasSuffix(s.SSHAuthorizedKeys[0], "tech@store") {
		t.Errorf("ssh keys = %q", s.SSHAuthorizedKeys)
	}
	if len(s.RegistryMirrors) != 1 || s.RegistryMirrors[0].Source != "quay.io/openshift-release-dev/ocp-release" {
		t.Errorf("mirrors = %+v", s.RegistryMirrors)
	}
	if len(s.Manifests) != 1 || s.Manifests[0].Name != "ns.yaml" {
		t.Errorf("manifests = %+v", s.Manifests)
	}

	// Without an install-config.yaml the seed keeps its cluster's name.
	sc, err = Load(ibiDir(t, ibiSite, ""))
	if err != nil || sc.Spec.ClusterName != "" || sc.Spec.PullSecret != "" {
		t.Errorf("without install-config: %+v, %v", sc, err)
	}
}

// What cannot be mapped is refused at its place, in the file that holds it, all at once.
func TestLoadImageBasedConfigRefuses(t *testing.T) {
	ibi := strings.NewReplacer(
		"hostname: sno-0042.store.example.com", "hostname: SNO_0042",
		"cluster_id: e6a68c95-ee5c-4edd-9bb1-8141ac3eb348", "cluster_id: not-a-uuid\nnodeLabels:\n  Zone/x: a\nseedImage: quay.io/x/seed:1",
		"      type: ethernet\n", "      type: vlan\n      vlan: {base-iface: eth9, id: 4095}\n",
		"mac-address: 00:00:00:00:00:00", "mac-address: 00:00:00:00:00",
	).Replace(ibiSite)
	ic := strings.Replace(ibiInstallConfig, "platform:\n", "proxy:\n  httpProxy: https://proxy:3128\n  noProxy: '*.example.com'\nplatform:\n", 1)
	ic = strings.Replace(ic, "baseDomain: store.example.com", "baseDomain: Store_Example", 1)
	path := ibiDir(t, ibi, ic)
	_, err := Load(path)
	var ve *strictyaml.ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want validation errors", err)
	}
	icPath := filepath.Join(filepath.Dir(path), installConfigFile)
	want := []string{
		path + `:13:11: hostname: "SNO_0042" is not an RFC 1123 host name`,
		path + `:15:13: cluster_id: "not-a-uuid" is not a lowercase UUID`,
		path + `:17:11: nodeLabels.Zone/x: label key "Zone/x" has a prefix that is not a lowercase DNS subdomain`,
		path + `:18:1: seedImage: unknown field`,
		path + `:24:26: networkConfig.interfaces[0].vlan.base-iface: no interface "eth9"`,
		path + `:24:36: networkConfig.interfaces[0].vlan.id: 4095 is not a VLAN ID`,
		path + `:26:20: networkConfig.interfaces[0].mac-address: "00:00:00:00:00" is not an Ethernet MAC address`,
		icPath + `:16:14: proxy.httpProxy: "https://proxy:3128": scheme "https" is not supported: http`,
		icPath + `:17:12: proxy.noProxy: entry 0 "*.example.com" is no IP address, CIDR or domain without wildcard characters`,
		icPath + `:2:13: baseDomain: "Store_Example" is not a DNS subdomain`,
	}
	got := ve.Error()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	if strings.Contains(got, "c2l0ZTpzZWNyZXQ=") {
		t.Errorf("the pull secret is quoted back:\n%s", got)
	}
}

// A file that is not a site config at all (a password or shadow file given by mistake, or
// through a symlink) is refused in one line that quotes none of it.
func TestLoadDoesNotEchoOtherFiles(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "shadow")
	os.WriteFile(other, []byte("root: $6$saltsalt$HASHEDPASSWORD\nadmin: hunter2\ntoken: ghp_0123456789abcdef\n"), 0o600)
	link := filepath.Join(dir, "site.yaml")
	os.Symlink(other, link)
	_, err := Load(link)
	var ve *strictyaml.ValidationErrors
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.Contains(err.Error(), "is not a site config") {
		t.Fatalf("err = %v, want one problem saying it is not a site config", err)
	}
	for _, secret := range []string{"HASHEDPASSWORD", "hunter2", "ghp_", "admin", "token"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes %q: %v", secret, err)
		}
	}
}

// An install-config.yaml beside the ImageBasedConfig whose pull secret is empty or missing is
// refused at its line, as the installer's ValidateInstallConfig refuses it.
func TestImageBasedEmptyPullSecret(t *testing.T) {
	for _, tc := range []struct{ name, ic, at string }{
		{"empty", strings.Replace(ibiInstallConfig, `pullSecret: '{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpzZWNyZXQ="}}}'`, `pullSecret: ""`, 1), ":21:13: pullSecret: the pull secret is empty or missing"},
		{"missing", strings.Replace(ibiInstallConfig, `pullSecret: '{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpzZWNyZXQ="}}}'`+"\n", "", 1), ":1:1: pullSecret: the pull secret is empty or missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ibiDir(t, ibiSite, tc.ic)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(filepath.Dir(path), installConfigFile)+tc.at) {
				t.Errorf("err = %v, want ...%s", err, tc.at)
			}
		})
	}
}

// An install-config's fips (the installer's types.InstallConfig FIPS) is the site's
// spec.fips, which the seed fit check compares with the seed's; it survives the medium.
func TestImageBasedFIPS(t *testing.T) {
	for _, fips := range []bool{false, true} {
		ic := ibiInstallConfig
		if fips {
			ic += "fips: true\n"
		}
		sc, err := Load(ibiDir(t, ibiSite, ic))
		if err != nil {
			t.Fatalf("fips %v: %v", fips, err)
		}
		if sc.Spec.FIPS != fips {
			t.Errorf("fips %v: spec.fips = %v", fips, sc.Spec.FIPS)
		}
		p := filepath.Join(t.TempDir(), "site.iso")
		if err := Write(t.Context(), sc, p); err != nil {
			t.Fatal(err)
		}
		back, err := ReadMedium(p)
		if err != nil || back.Spec.FIPS != fips {
			t.Errorf("fips %v: the medium reads back %v, %v", fips, back.Spec.FIPS, err)
		}
	}
}
