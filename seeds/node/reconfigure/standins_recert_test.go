package reconfigure

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The recert stand-in writes the pull secret and the trust bundle only where recert does:
// under the cluster_customization_dirs it was given. A kubelet directory that is mounted but
// not named keeps its old config.json, so a hook that leaves it out is caught.
func TestRecertStandInCustomizationDirs(t *testing.T) {
	const old, site = `{"auths":{"placeholder":{"auth":"c2VhbGVkOnNlZWQ="}}}`, `{"auths":{"site.example":{"auth":"c2l0ZTpzZWNyZXQ="}}}`
	const oldCA, siteCA = "seed anchors\n", "-----BEGIN CERTIFICATE-----\nsite\n-----END CERTIFICATE-----\n"
	anchor := "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	for _, tc := range []struct {
		name               string
		dirs               []string
		wantSecret, wantCA string
	}{
		{"kubelet and pki named", []string{"/var/lib/kubelet", "/etc/pki"}, site, siteCA},
		{"kubelet left out", []string{"/etc/kubernetes", "/etc/pki"}, old, siteCA},
		{"pki left out", []string{"/var/lib/kubelet"}, site, oldCA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"/var/lib/kubelet/config.json": old, "/var/lib/kubelet/.hidden/config.json": old,
				"/etc/kubernetes/a.crt": "x", anchor: oldCA}
			for p, body := range files {
				os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
				if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, _ := json.Marshal(map[string]any{"cluster_customization_dirs": tc.dirs, "pull_secret": site, "user_ca_bundle": siteCA})
			os.WriteFile(filepath.Join(root, "recert.json"), cfg, 0o600)
			// Every directory is mounted at its own path, as the hook mounts them.
			mounts := map[string]string{"/config": root}
			for _, d := range []string{"/var/lib/kubelet", "/etc/kubernetes", "/etc/pki"} {
				mounts[d] = filepath.Join(root, d)
			}
			c := &commands{root: root, running: map[string]bool{EtcdContainerName: true}}
			if err := c.recert([]string{"recert"}, mounts, "/config/recert.json"); err != nil {
				t.Fatal(err)
			}
			read := func(p string) string { b, _ := os.ReadFile(filepath.Join(root, p)); return string(b) }
			if got := read("/var/lib/kubelet/config.json"); got != tc.wantSecret {
				t.Errorf("config.json = %s, want %s", got, tc.wantSecret)
			}
			if got := read(anchor); got != tc.wantCA {
				t.Errorf("anchor = %q, want %q", got, tc.wantCA)
			}
			if got := read("/var/lib/kubelet/.hidden/config.json"); got != old {
				t.Errorf("a hidden directory's config.json was rewritten: recert's glob skips it")
			}
		})
	}
}
