package reconfigure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// The stand-ins refuse what their upstream tool refuses, with its exit status and message,
// so a test passes only when the hook gives them what the real tools accept.
func TestStandInsRefuse(t *testing.T) {
	h := newHarness(t)
	root := h.root
	write := func(p, content string) string {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return full
	}
	kc := write("/kubeconfig", "apiVersion: v1\nkind: Config\n")
	write("/manifests/a.yaml", "apiVersion: v1\nmetadata: {name: a}\n")
	write("/etc/ssh/.keep", "")
	write("/etc/recert/config.json", `{"crypto_dirs":["/etc/kubernetes"],"regenerate_server_ssh_keys":"/etc/ssh","summary_file_clean":"/etc/recert/s.yaml"}`)
	write("/etc/recert/unknown.json", `{"regenerate_server_ssh_key":"/etc/ssh"}`)
	write("/etc/kubernetes/a.crt", "x")
	write("/etc/recert/proxy5.json", `{"proxy":"http://p:3128|http://p:3128|.svc|http://p:3128|http://p:3128"}`)
	write("/etc/recert/bundle-nocolon.json", `{"proxy_trusted_ca_bundle":"user-ca-bundle"}`)
	write("/etc/recert/bundle-key.json", `{"proxy_trusted_ca_bundle":"proxy-ca:-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}`)
	write("/etc/recert/bundle-user.json", `{"crypto_dirs":["/etc/kubernetes"],"proxy_trusted_ca_bundle":"user-ca-bundle:"}`)
	recert := func(cfg string) []string {
		return []string{"podman", "run", "--rm", "--name", "snofactory-recert", "-v", root + "/etc/ssh:/etc/ssh", "-v", root + "/etc/kubernetes:/etc/kubernetes",
			"-v", root + "/etc/recert:/etc/recert", "--env", "RECERT_CONFIG=/etc/recert/" + cfg, "quay.io/edge-infrastructure/recert:v0"}
	}
	etcd := []string{"podman", "run", "--detach", "--rm", "--name", EtcdContainerName, "-v", root + "/etc:/store", "etcd-image", "--name", "editor"}
	for _, tc := range []struct {
		name   string
		before [][]string
		argv   []string
		code   string
		stderr string
	}{
		{"nmstatectl: invalid YAML", nil, []string{"nmstatectl", "apply", write("/s1.yml", "interfaces: [\n")}, "exit status 1", "Invalid YAML string"},
		{"nmstatectl: unknown key", nil, []string{"nmstatectl", "apply", write("/s2.yml", "dns:\n  server: [1.1.1.1]\n")}, "exit status 1", "unknown field `dns`"},
		{"update-ca-trust: no extracted directory", nil, []string{"update-ca-trust"}, "exit status 1", "p11-kit: couldn't create file"},
		{"oc: patch an unknown node", nil, []string{"oc", "--kubeconfig", kc, "patch", "node", "sno-9", "--type", "merge", "-p", `{"metadata":{"labels":{"a":"b"}}}`}, "exit status 1", `nodes "sno-9" not found`},
		{"nmstatectl: bond without mode", nil, []string{"nmstatectl", "apply", write("/s3.yml", "interfaces:\n- {name: bond0, type: bond, link-aggregation: {port: [eth0]}}\n")}, "exit status 1", "Bond mode is mandatory for new bond interface: bond0"},
		{"nmstatectl: VLAN without base", nil, []string{"nmstatectl", "apply", write("/s4.yml", "interfaces:\n- {name: v100, type: vlan, vlan: {id: 100}}\n")}, "exit status 1", "Missing 'vlan.base-iface' for interface 'v100'"},
		{"nmstatectl: route without interface", nil, []string{"nmstatectl", "apply", write("/s5.yml", "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-address: 10.0.0.1}\n")}, "exit status 1", "Route with empty next hop interface is not supported"},
		{"oc: apply without kind", nil, []string{"oc", "--kubeconfig", kc, "apply", "-f", filepath.Join(root, "manifests")}, "exit status 1", "kind not set"},
		{"oc: no kubeconfig", nil, []string{"oc", "--kubeconfig", root + "/nope", "get", "nodes"}, "exit status 1", "no such file or directory"},
		{"systemctl: unknown unit", nil, []string{"systemctl", "restart", "chronyd.service"}, "exit status 5", "Unit chronyd.service not found."},
		{"hostnamectl: invalid name", nil, []string{"hostnamectl", "set-hostname", "sno_0042"}, "exit status 1", "Invalid static hostname"},
		{"ssh-keygen: no /etc/ssh", nil, []string{"ssh-keygen", "-A", "-f", root + "/other"}, "exit status 1", "Could not save your private key"},
		{"busybox ip: address without prefix", nil, []string{"ip", "addr", "add", "10.0.2.5", "dev", "eth0"}, "exit status 1", "an inet prefix is expected"},
		{"busybox ip: unknown verb", nil, []string{"ip", "addr", "replace", "10.0.2.5/24", "dev", "eth0"}, "exit status 1", "invalid argument"},
		{"busybox hostname: too long", nil, []string{"hostname", strings.Repeat("a", 65)}, "exit status 1", "Invalid argument"},
		{"podman: stop what is not running", nil, []string{"podman", "stop", EtcdContainerName}, "exit status 125", "no such container"},
		{"recert: no etcd", nil, recert("config.json"), "exit status 1", "connecting to etcd"},
		{"recert: unknown key", [][]string{etcd}, recert("unknown.json"), "exit status 1", "unknown keys"},
		{"recert: proxy of five parts", nil, recert("proxy5.json"), "exit status 1", "expected six parts separated by '|' in proxy argument"},
		{"recert: proxy trusted CA without a name", nil, recert("bundle-nocolon.json"), "exit status 1", "expected two parts separated by ':'"},
		{"recert: proxy trusted CA with a key", nil, recert("bundle-key.json"), "exit status 1", "must contain only certificates"},
		{"recert: user-ca-bundle without user_ca_bundle", [][]string{etcd}, recert("bundle-user.json"), "exit status 1", "requires user-ca-bundle to be set"},
		{"recert: no host keys", [][]string{etcd}, recert("config.json"), "exit status 1", "No SSH server keys found in /etc/ssh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.cmds.running = map[string]bool{}
			for _, b := range tc.before {
				if _, err := h.cmds.run(context.Background(), b[0], b[1:]...); err != nil {
					t.Fatal(err)
				}
			}
			_, err := h.cmds.run(context.Background(), tc.argv[0], tc.argv[1:]...)
			var ce *steps.CommandError
			if !errors.As(err, &ce) || ce.Err.Error() != tc.code || !strings.Contains(ce.Stderr, tc.stderr) {
				t.Errorf("err = %v, want %s with %q on stderr", err, tc.code, tc.stderr)
			}
		})
	}
}
