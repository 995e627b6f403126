package siteconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
)

// configISO writes a medium in the image-based installer's layout: label, manifest.json
// and manifests under the paths `openshift-install image-based create config-image` uses.
func configISO(t *testing.T, label string, files map[string]string) string {
	t.Helper()
	return isotest.Write(t, filepath.Join(t.TempDir(), "imagebasedconfig.iso"), label, files)
}

func seedReconfigurationJSON(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	retained := &SiteConfig{Spec: siteSpecForTest()}
	if _, err := MakeCredentials(retained, nil, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	k := retained.Spec.KubeconfigCrypto
	m := map[string]any{
		"api_version": 1, "base_domain": "edge.example.com", "cluster_name": "store-0042", "cluster_id": "0f4b3b5e-6c2d-4d7a-9a57-2b8f2f8e8c11",
		"infra_id": "store-0042-x7k2p", "hostname": "sno-0042", "release_registry": "quay.io",
		"ssh_key":                 "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq0Nf1Nf8cDAHn9bUqHqz0XDOdOr2zD4K3l7Kf9ZfVb tech@depot",
		"kubeadmin_password_hash": retained.Spec.KubeadminPasswordHash,
		"raw_nm_state_config":     "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  ipv4:\n    enabled: true\n    address:\n    - ip: 192.168.50.10\n      prefix-length: 24\n",
		"pull_secret":             `{"auths":{"quay.io":{"auth":"c2l0ZTpzZWNyZXQ="}}}`,
		"chrony_config":           "server ntp.example.com iburst\ndriftfile /var/lib/chrony/drift\n",
		"KubeconfigCryptoRetention": map[string]any{
			"KubeAPICrypto": map[string]any{
				"ServingCrypto": map[string]any{"localhost_signer_private_key": k.LocalhostSignerKey, "service_network_signer_private_key": k.ServiceNetworkSignerKey,
					"loadbalancer_external_signer_private_key": k.LoadBalancerSignerKey},
				"ClientAuthCrypto": map[string]any{"admin_ca_certificate": k.AdminClientCACert},
			},
			"IngresssCrypto": map[string]any{},
		},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// siteSpecForTest names a renamed cluster, so MakeCredentials makes retained crypto.
func siteSpecForTest() Spec {
	return Spec{Hostname: "sno-0042", ClusterName: "store-0042", BaseDomain: "edge.example.com"}
}

// A medium made by the image-based installer's config-image target reads as a site config:
// names, IDs, network, NTP, pull secret, kubeadmin hash, retained crypto and manifests.
func TestReadImageBasedMedium(t *testing.T) {
	iso := configISO(t, ImageBasedVolumeLabel, map[string]string{
		imageBasedManifest: seedReconfigurationJSON(t, nil),
		"cluster-configuration/manifests/image-digest-sources.json": `{"apiVersion":"config.openshift.io/v1","kind":"ImageDigestMirrorSet","metadata":{"name":"mirrors"},"spec":{}}`,
		"extra-manifests/cm.yaml":                                   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: site\n  namespace: default\n",
	})
	sc, err := ReadMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	s := sc.Spec
	if s.Hostname != "sno-0042" || s.ClusterName != "store-0042" || s.BaseDomain != "edge.example.com" || s.InfraID != "store-0042-x7k2p" ||
		s.ClusterID == "" || s.KubeadminPasswordHash == "" || !strings.Contains(s.PullSecret, "c2l0ZTpzZWNyZXQ=") {
		t.Errorf("spec %+v", s)
	}
	if s.Network == nil || len(s.Network.Interfaces) != 1 || s.Network.Interfaces[0].IPv4.Address[0].IP != "192.168.50.10" {
		t.Errorf("network %+v", s.Network)
	}
	if s.NTP == nil || len(s.NTP.Servers) != 1 || s.NTP.Servers[0] != "ntp.example.com" {
		t.Errorf("ntp %+v", s.NTP)
	}
	if s.KubeconfigCrypto == nil || s.KubeconfigCrypto.AdminClientCACert == "" || len(s.SSHAuthorizedKeys) != 1 {
		t.Errorf("crypto/keys %+v %v", s.KubeconfigCrypto, s.SSHAuthorizedKeys)
	}
	if len(s.Manifests) != 2 {
		t.Errorf("manifests %+v", s.Manifests)
	}
}

// What the hook cannot apply is refused by name, before anything is applied.
func TestReadImageBasedMediumRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"api version", func(m map[string]any) { m["api_version"] = 2 }, "api_version 2"},
		{"status proxy", func(m map[string]any) { m["status_proxy"] = map[string]string{"httpProxy": "http://p:3128"} }, "sets status_proxy"},
		{"proxy by the one validator", func(m map[string]any) { m["proxy"] = map[string]string{"httpProxy": "https://user:s3cret@p:3128"} },
			`spec.proxy.httpProxy: "https://<credentials>@p:3128": scheme "https" is not supported`},
		{"empty proxy", func(m map[string]any) { m["proxy"] = map[string]string{} }, "must include httpProxy or httpsProxy"},
		{"VLAN ID", func(m map[string]any) {
			m["raw_nm_state_config"] = "interfaces:\n- name: eth0\n  type: ethernet\n- name: eth0.4095\n  type: vlan\n  vlan: {base-iface: eth0, id: 4095}\n"
		}, "4095 is not a VLAN ID"},
		{"bad hash", func(m map[string]any) { m["kubeadmin_password_hash"] = "plain" }, "not a bcrypt hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iso := configISO(t, ImageBasedVolumeLabel, map[string]string{imageBasedManifest: seedReconfigurationJSON(t, tc.edit)})
			if _, err := ReadMedium(iso); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ReadMedium = %v, want %q and no secret", err, tc.want)
			}
		})
	}
	if _, err := ReadMedium(configISO(t, "OTHER", map[string]string{"x.txt": "x"})); err == nil || !strings.Contains(err.Error(), ImageBasedVolumeLabel) {
		t.Errorf("another label: %v", err)
	}
}

// The installer's proxy becomes the site's spec.proxy, applied as ours is, and its trusted-CA
// configmap becomes the trust bundle policy that gives the proxy the same CA
// (installer pkg/asset/imagebased/configimage/clusterconfiguration.go
// ClusterConfiguration.Generate writes user-ca-bundle for Always, or Proxyonly with a proxy).
func TestReadImageBasedMediumProxy(t *testing.T) {
	ca, err := os.ReadFile("testdata/corporate-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	proxy := map[string]string{"httpProxy": "http://proxy.edge.example.com:3128", "httpsProxy": "http://proxy.edge.example.com:3128",
		"noProxy": ".edge.example.com,10.128.0.0/14,172.30.0.0/16,192.168.50.0/24"}
	trust := func(name, bundle string) map[string]string {
		return map[string]string{"userCaBundle": string(ca), "proxyConfigmapName": name, "proxyConfigmapBundle": bundle}
	}
	for _, tc := range []struct {
		name       string
		proxy      map[string]string
		trust      map[string]string
		wantPolicy string
		want       string
	}{
		{"proxy, bundle trusted by it", proxy, trust("user-ca-bundle", string(ca)), TrustPolicyProxyOnly, ""},
		{"proxy, no bundle", proxy, nil, "", ""},
		{"bundle trusted always, no proxy", nil, trust("user-ca-bundle", string(ca)), TrustPolicyAlways, ""},
		{"bundle, no proxy", nil, trust("", ""), "", ""},
		{"proxy not trusting the bundle", proxy, trust("", ""), "", `set proxyConfigmapName to "user-ca-bundle"`},
		{"another configmap", proxy, trust("corp-ca", string(ca)), "", `proxyConfigmapName is "corp-ca"`},
		{"bundles differ", proxy, trust("user-ca-bundle", "other"), "", "must equal userCaBundle"},
		{"bundle without name", nil, trust("", string(ca)), "", "proxyConfigmapBundle without proxyConfigmapName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iso := configISO(t, ImageBasedVolumeLabel, map[string]string{imageBasedManifest: seedReconfigurationJSON(t, func(m map[string]any) {
				if tc.proxy != nil {
					m["proxy"] = tc.proxy
				}
				if tc.trust != nil {
					m["additionalTrustBundle"] = tc.trust
				}
			})})
			sc, err := ReadMedium(iso)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("ReadMedium = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sc.HasProxy() != (tc.proxy != nil) || sc.Spec.AdditionalTrustBundlePolicy != tc.wantPolicy {
				t.Fatalf("proxy %+v policy %q, want %v %q", sc.Spec.Proxy, sc.Spec.AdditionalTrustBundlePolicy, tc.proxy != nil, tc.wantPolicy)
			}
			if p := sc.Spec.Proxy; p != nil && (p.HTTPProxy != proxy["httpProxy"] || p.HTTPSProxy != proxy["httpsProxy"] || p.NoProxy != proxy["noProxy"]) {
				t.Errorf("proxy %+v, want %v", p, proxy)
			}
			if got, want := sc.ProxyTrustsBundle(), tc.trust != nil && tc.trust["proxyConfigmapName"] != ""; got != want {
				t.Errorf("ProxyTrustsBundle = %v, want %v", got, want)
			}
		})
	}
}

// A crafted medium with more manifests than a site config may carry is refused while it
// is read, not after.
func TestReadImageBasedMediumBoundsManifests(t *testing.T) {
	files := map[string]string{imageBasedManifest: seedReconfigurationJSON(t, nil)}
	for i := 0; i <= maxManifests; i++ {
		files[fmt.Sprintf("extra-manifests/m%d.yaml", i)] = "kind: ConfigMap\n"
	}
	if _, err := ReadMedium(configISO(t, ImageBasedVolumeLabel, files)); err == nil || !strings.Contains(err.Error(), "more than 500 manifests") {
		t.Errorf("ReadMedium = %v", err)
	}
}
