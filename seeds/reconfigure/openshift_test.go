package reconfigure

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/agent"
	"github.com/snofactory/snofactory/seeds/recert"
	"github.com/snofactory/snofactory/seeds/siteconfig"
)

// seedKubeconfig is the shape of an SNO node's /var/lib/kubelet/kubeconfig (credentials
// left out): the kubelet reaches the API at api-int.CLUSTER.DOMAIN.
const seedKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: LS0t
    server: https://api-int.seed.factory.example:6443
  name: local
contexts:
- context:
    cluster: local
    user: kubelet
  name: kubelet
current-context: kubelet
`

// openshiftNode lays down what an installed SNO seed has under the root: its names, the
// node IP chosen by nodeip-configuration, the directories recert scans, the pinned images.
func openshiftNode(t *testing.T, h *harness) {
	t.Helper()
	files := map[string]string{
		"/etc/hostname":          "seed-node\n",
		KubeletKubeConfig:        seedKubeconfig,
		NodeNetDropIn:            "[Service]\nEnvironment=\"KUBELET_NODE_IP=192.168.127.10\" \"KUBELET_NODE_IPS=192.168.127.10\"\n",
		ImagesFile:               `{"recertImage":"quay.io/edge-infrastructure/recert@sha256:1111","etcdImage":"quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222"}`,
		"/etc/kubernetes/a.crt":  "x",
		"/etc/mco/proxy.env":     "",
		"/home/core/.bashrc":     "",
		"/var/lib/etcd/member/x": "",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(h.root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(h.root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kc := filepath.Join(h.root, DefaultKubeConfig)
	h.cmds.outputs["oc --kubeconfig "+kc+" get --raw /readyz"] = "ok"
}

// OpenShift: nmstatectl, hostnamectl, chrony, recert through podman with a standalone etcd,
// kubelet started, the API awaited, then the manifests and the pull secret through oc.
// The command lines follow the tools' documented CLIs: nmstatectl apply STATE_FILE,
// hostnamectl set-hostname NAME, podman run/exec/stop, oc get --raw, oc apply -f DIR,
// oc set data secret/NAME --from-file=KEY=PATH.
func TestOpenShiftSteps(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	kc := filepath.Join(h.root, DefaultKubeConfig)
	// The API answers on the third poll.
	polls := 0
	o := h.options(TargetOpenShift, medium(t, "site.yaml", nil))
	o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		out, err := h.cmds.run(ctx, name, args...)
		if strings.HasSuffix(strings.Join(args, " "), "/readyz") {
			if polls++; polls < 3 {
				return []byte("connection refused"), os.ErrDeadlineExceeded
			}
		}
		return out, err
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
	}
	r := func(p string) string { return filepath.Join(h.root, p) }
	want := []string{
		"nmstatectl apply " + r(OpenShiftNetworkFile),
		"hostnamectl set-hostname sno-0042",
		"nmstatectl apply " + r(OpenShiftDNSFile),
		"systemctl restart chronyd.service",
		"podman run --detach --rm --replace --name snofactory-recert-etcd --network=host --privileged --entrypoint etcd -v " +
			r("/var/lib/etcd") + ":/store quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222 --name editor --data-dir /store",
		"podman exec snofactory-recert-etcd etcdctl endpoint health",
		"", // recert: checked below
		"podman stop snofactory-recert-etcd",
		"systemctl enable crio.service kubelet.service",
		"systemctl start --no-block crio.service kubelet.service",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " apply -f " + r(GeneratedManifestsDir),
		"oc --kubeconfig " + kc + " apply -f " + r(ManifestsDir),
		"oc --kubeconfig " + kc + " -n openshift-config set data secret/pull-secret --from-file=.dockerconfigjson=" + r(OpenShiftPullSecretFile),
	}
	got := slices.Clone(h.cmds.lines)
	if len(got) != len(want) {
		t.Fatalf("commands:\n%s", strings.Join(got, "\n"))
	}
	recert := got[6]
	got[6] = ""
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("command %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	for _, part := range []string{"podman run --rm --replace --name snofactory-recert --network=host --privileged",
		"-v " + r("/etc/kubernetes") + ":/etc/kubernetes", "quay.io/edge-infrastructure/recert@sha256:1111 --etcd-endpoint localhost:2379",
		"--cluster-rename store-0042:edge.example.com", "--hostname sno-0042", "--ip 192.168.50.10 --ip fd00:50::10",
		"--cn-san-replace 192.168.127.10:192.168.50.10", "--extend-expiration"} {
		if !strings.Contains(recert, part) {
			t.Errorf("recert command lacks %q:\n%s", part, recert)
		}
	}
	// The network state nmstatectl gets is nmstate's schema, without the resolver (the dns
	// step applies that).
	var state map[string]any
	if err := yaml.Unmarshal([]byte(h.read(t, OpenShiftNetworkFile)), &state); err != nil || state["interfaces"] == nil || state["dns-resolver"] != nil {
		t.Errorf("network state %v (%v)", state, err)
	}
	if s := h.read(t, OpenShiftDNSFile); !strings.Contains(s, "dns-resolver:\n    config:\n        server:\n            - 192.168.50.1") {
		t.Errorf("dns state %q", s)
	}
	for p, c := range map[string]string{
		ChronyConf:              "server ntp.example.com iburst\n",
		OpenShiftPullSecretFile: `"auths"`,
		OpenShiftKeysFile:       "tech@depot",
		filepath.Join(GeneratedManifestsDir, MirrorSetName+".yaml"): "kind: ImageDigestMirrorSet",
		MirrorsFile: `location = "registry.store-0042.example:5000/ocp-release"`,
	} {
		if !strings.Contains(h.read(t, p), c) {
			t.Errorf("%s = %q, want it to hold %q", p, h.read(t, p), c)
		}
	}
	if m, _ := h.rep.step("recert", agent.StatusOK); m.Details["cluster"] != "store-0042.edge.example.com" || m.Details["extendExpiration"] != "true" {
		t.Errorf("recert report %v", m.Details)
	}
}

// checkRecertArgs checks a command line against recert's recorded CLI contract.
func checkRecertArgs(t *testing.T, args []string, exists func(string) bool) {
	t.Helper()
	if err := recert.Check(args, exists); err != nil {
		t.Error(err)
	}
}

func TestRecertArgs(t *testing.T) {
	seed := Identity{ClusterName: "seed", BaseDomain: "factory.example", Hostname: "seed-node", IPs: []string{"192.168.127.10", "fd00:127::10"}}
	for _, tc := range []struct {
		name       string
		site       Identity
		want, none []string
	}{
		{"everything changes", Identity{ClusterName: "store-1", BaseDomain: "edge.example", Hostname: "sno-1", IPs: []string{"10.1.0.5", "fd00:1::5"}},
			[]string{"--cluster-rename store-1:edge.example", "--cn-san-replace api-int.seed.factory.example:api-int.store-1.edge.example",
				"--cn-san-replace *.apps.seed.factory.example:*.apps.store-1.edge.example", "--hostname sno-1",
				"--cn-san-replace seed-node:sno-1", "--ip 10.1.0.5 --ip fd00:1::5", "--cn-san-replace 192.168.127.10:10.1.0.5",
				"--cn-san-replace fd00:127::10,fd00:1::5", "--extend-expiration"}, nil},
		{"hostname only", Identity{ClusterName: "seed", BaseDomain: "factory.example", Hostname: "sno-2", IPs: seed.IPs},
			[]string{"--hostname sno-2", "--extend-expiration"}, []string{"--cluster-rename", "--ip"}},
		{"pinned node IP", Identity{ClusterName: "seed", BaseDomain: "other.example", Hostname: "seed-node"},
			[]string{"--cluster-rename seed:other.example", "--extend-expiration"}, []string{"--ip", "--hostname"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := RecertParams{EtcdEndpoint: "localhost:2379", Seed: seed, Site: tc.site,
				CryptoDirs: []string{"/etc/kubernetes"}, CustomizationDirs: []string{"/etc/kubernetes"},
				CustomizationFiles: []string{"/etc/chrony.conf"}, ChronyConfig: chronyConf([]string{"ntp.example"}),
				SummaryFile: RecertSummaryFile}
			args := RecertArgs(p)
			checkRecertArgs(t, args, func(string) bool { return true })
			line := strings.Join(args, " ")
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("lacks %q:\n%s", w, line)
				}
			}
			for _, n := range tc.none {
				if strings.Contains(line, n+" ") {
					t.Errorf("has %q:\n%s", n, line)
				}
			}
		})
	}
}

// The recert command line of a whole OpenShift run keeps recert's contract too, with
// every path it names present on the node.
func TestRecertCommandKeepsContract(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	if _, err := Run(context.Background(), h.options(TargetOpenShift, medium(t, "site.yaml", nil))); err != nil {
		t.Fatal(err)
	}
	for _, argv := range h.cmds.argv {
		i := slices.Index(argv, "quay.io/edge-infrastructure/recert@sha256:1111")
		if i > 0 && argv[1] == "run" {
			checkRecertArgs(t, argv[i+1:], func(p string) bool {
				_, err := os.Stat(filepath.Join(h.root, p))
				return err == nil
			})
			return
		}
	}
	t.Fatalf("no recert run in %q", h.cmds.lines)
}

func TestSeedIdentity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   Identity
		pinned bool
		err    string
	}{
		{"nodeip-configuration", map[string]string{"/etc/hostname": "seed-node\n", KubeletKubeConfig: seedKubeconfig,
			NodeNetDropIn: "[Service]\nEnvironment=\"KUBELET_NODE_IP=192.168.127.10\" \"KUBELET_NODE_IPS=192.168.127.10\"\n"},
			Identity{"seed", "factory.example", "seed-node", []string{"192.168.127.10"}}, false, ""},
		{"pinned by render", map[string]string{"/etc/hostname": "seed-node\n", KubeletKubeConfig: seedKubeconfig,
			PinnedNodeIPDropIn: "[Service]\nEnvironment=\"KUBELET_NODE_IP=172.22.0.2\" \"KUBELET_NODE_IPS=172.22.0.2\"\n"},
			Identity{"seed", "factory.example", "seed-node", nil}, true, ""},
		{"foreign API host", map[string]string{"/etc/hostname": "n\n", KubeletKubeConfig: strings.Replace(seedKubeconfig, "api-int.seed.factory.example", "10.0.0.1", 1)},
			Identity{}, false, "is not api-int.CLUSTER.DOMAIN"},
		{"no kubeconfig", map[string]string{"/etc/hostname": "n\n"}, Identity{}, false, "reading the seed's cluster name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
				os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
			}
			id, pinned, err := SeedIdentity(root)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || pinned != tc.pinned || id.ClusterName != tc.want.ClusterName || id.BaseDomain != tc.want.BaseDomain ||
				id.Hostname != tc.want.Hostname || !slices.Equal(id.IPs, tc.want.IPs) {
				t.Errorf("got %+v pinned=%v err=%v, want %+v pinned=%v", id, pinned, err, tc.want, tc.pinned)
			}
		})
	}
}

// siteIPs picks the first static address of each family, IPv4 first, as recert's --ip wants.
func TestSiteIPs(t *testing.T) {
	sc := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Network: &siteconfig.Network{Interfaces: []siteconfig.Interface{
		{Name: "a", IPv6: &siteconfig.IPConfig{Address: []siteconfig.Address{{IP: "fd00::1", PrefixLength: 64}}}},
		{Name: "b", IPv4: &siteconfig.IPConfig{Address: []siteconfig.Address{{IP: "10.0.0.2", PrefixLength: 24}, {IP: "10.0.0.3", PrefixLength: 24}}}},
	}}}}
	if got := siteIPs(sc); !slices.Equal(got, []string{"10.0.0.2", "fd00::1"}) {
		t.Errorf("siteIPs %v", got)
	}
}
