package reconfigure

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/recert"
	"github.com/snofactory/snofactory/seeds/node/seedinfo"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
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

// openshiftNode lays down what a sealed SNO seed has under the root: the seed cluster
// info the seal read from the cluster's objects, the node IP chosen by
// nodeip-configuration, the directories recert scans, the pinned images; and oc answers
// for a cluster that has settled (a stand-in: no OpenShift node runs here).
func openshiftNode(t *testing.T, h *harness) {
	t.Helper()
	files := map[string]string{
		"/etc/hostname":   "localhost\n", // never read: the seal recorded the identity
		KubeletKubeConfig: seedKubeconfig,
		NodeNetDropIn:     "[Service]\nEnvironment=\"KUBELET_NODE_IP=192.168.127.10\" \"KUBELET_NODE_IPS=192.168.127.10\"\n",
		seedinfo.File: `{"seed_cluster_ocp_version":"4.20.3","base_domain":"factory.example","cluster_name":"seed","node_ips":["192.168.127.10"],
			"sno_hostname":"seed-node","ingress_certificate_cn":"ingress-operator@1700000000","mirror_registry_configured":false,"has_proxy":false,"has_fips":false}`,
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
	settled := h.clock.T.Add(-time.Hour).Format(time.RFC3339)
	h.cmds.outputs["oc --kubeconfig "+kc+" get --raw /readyz"] = "ok"
	h.cmds.outputs["oc --kubeconfig "+kc+" get clusterversion.config.openshift.io version -o json"] =
		`{"metadata":{"name":"version"},"status":{"conditions":[{"type":"Available","status":"True"},{"type":"Failing","status":"False"},{"type":"Progressing","status":"False"}]}}`
	h.cmds.outputs["oc --kubeconfig "+kc+" get clusteroperators.config.openshift.io -o json"] = `{"items":[{"metadata":{"name":"etcd"},"status":{"conditions":[
		{"type":"Available","status":"True"},{"type":"Degraded","status":"False"},{"type":"Progressing","status":"False","lastTransitionTime":"` + settled + `"}]}}]}`
	h.cmds.outputs["oc --kubeconfig "+kc+" get nodes -o json"] = `{"items":[{"metadata":{"name":"sno-0042"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}]}`
}

// OpenShift follows lifecycle-agent's post-pivot: nmstatectl, hostnamectl, chrony, the
// dnsmasq overrides, recert (with the site's pull secret, kubeadmin hash, infra ID and CN
// rules) through podman with a standalone etcd, kubelet, the API, the seed's mirror objects
// out, the manifests in, the new cluster ID, the readiness waits, the unit disabled. The
// commands follow the tools' documented CLIs; the real run takes exactly the dry run's list.
func TestOpenShiftSteps(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	kc := filepath.Join(h.root, DefaultKubeConfig)
	// The API answers on the third poll.
	polls := 0
	hash := "$2a$10$abcdefghijklmnopqrstuuHRQnRSdS2n6UePa9WJ7CNnJ3/Q1aDzC"
	o := h.options(oskind.OpenShift, medium(t, "site.yaml", func(sc *siteconfig.SiteConfig) { sc.Spec.KubeadminPasswordHash = hash }))
	var recertConfig []byte
	o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		out, err := h.cmds.run(ctx, name, args...)
		if slices.Contains(args, "RECERT_CONFIG="+RecertConfigFile) {
			recertConfig, _ = os.ReadFile(filepath.Join(h.root, RecertConfigFile))
		}
		if strings.HasSuffix(strings.Join(args, " "), "/readyz") {
			if polls++; polls < 3 {
				return []byte("connection refused"), os.ErrDeadlineExceeded
			}
		}
		return out, err
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
	}
	r := func(p string) string { return filepath.Join(h.root, p) }
	ids := h.read(t, DefaultStateDir+"/"+siteIDsFile)
	var kept siteIDs
	if err := json.Unmarshal([]byte(ids), &kept); err != nil || len(kept.ClusterID) != 36 || !strings.HasPrefix(kept.InfraID, "store-0042-") {
		t.Fatalf("kept IDs %s (%v)", ids, err)
	}
	want := []string{
		"nmstatectl apply " + r(OpenShiftNetworkFile),
		"hostnamectl set-hostname sno-0042",
		"nmstatectl apply " + r(OpenShiftDNSFile),
		"systemctl restart chronyd.service",
		"systemctl restart dnsmasq.service",
		"podman run --detach --rm --replace --name snofactory-recert-etcd --network=host --privileged --entrypoint etcd -v " +
			r("/var/lib/etcd") + ":/store quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222 --name editor --data-dir /store",
		"curl --silent --fail --max-time 5 http://localhost:2379/health",
		"", // recert: checked below
		"podman stop snofactory-recert-etcd",
		"systemctl enable kubelet.service",
		"systemctl start --no-block crio.service kubelet.service",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " get --raw /readyz",
		"oc --kubeconfig " + kc + " delete --ignore-not-found --all imagecontentsourcepolicies.operator.openshift.io,imagedigestmirrorsets.config.openshift.io",
		"oc --kubeconfig " + kc + " delete --ignore-not-found --all -n openshift-marketplace catalogsources.operators.coreos.com",
		"oc --kubeconfig " + kc + " apply -f " + r(GeneratedManifestsDir),
		"oc --kubeconfig " + kc + " apply -f " + r(ManifestsDir),
		"oc --kubeconfig " + kc + ` patch clusterversion.config.openshift.io version --type merge -p {"spec":{"clusterID":"` + kept.ClusterID + `"}}`,
		"oc --kubeconfig " + kc + " get clusterversion.config.openshift.io version -o json",
		"oc --kubeconfig " + kc + " get clusteroperators.config.openshift.io -o json",
		"oc --kubeconfig " + kc + " get nodes -o json",
		"systemctl disable snofactory-reconfigure.service",
	}
	got := slices.Clone(h.cmds.lines)
	if len(got) != len(want) {
		t.Fatalf("commands:\n%s", strings.Join(got, "\n"))
	}
	recertLine := got[7]
	got[7] = ""
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("command %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	for _, part := range []string{"podman run --rm --replace --name snofactory-recert --network=host --privileged",
		"-v " + r("/etc/kubernetes") + ":/etc/kubernetes", "--env RECERT_CONFIG=" + RecertConfigFile + " quay.io/edge-infrastructure/recert@sha256:1111"} {
		if !strings.Contains(recertLine, part) {
			t.Errorf("recert command lacks %q:\n%s", part, recertLine)
		}
	}
	if strings.Contains(recertLine, "auths") {
		t.Error("the pull secret is on recert's command line")
	}
	// recert's settings, in the file lifecycle-agent would write (recert.go RecertConfig).
	var rc map[string]any
	if err := json.Unmarshal(recertConfig, &rc); err != nil {
		t.Fatalf("recert config %q: %v", recertConfig, err)
	}
	for key, want := range map[string]any{
		"cluster_rename": "store-0042:edge.example.com:" + kept.InfraID, "hostname": "sno-0042", "kubeadmin_password_hash": hash,
		"regenerate_server_ssh_keys": "/etc/ssh", "extend_expiration": true, "etcd_endpoint": "localhost:2379",
		"summary_file_clean": RecertSummaryFile,
	} {
		if rc[key] != want {
			t.Errorf("recert config %s = %v, want %v", key, rc[key], want)
		}
	}
	if ps, _ := rc["pull_secret"].(string); !strings.Contains(ps, `"auths"`) {
		t.Errorf("recert config pull_secret = %q", ps)
	}
	rules := fmt.Sprint(rc["cn_san_replace_rules"])
	for _, w := range []string{"system:node:seed-node,system:node:sno-0042", "seed-node,sno-0042", "api.seed.factory.example,api.store-0042.edge.example.com",
		"192.168.127.10,192.168.50.10"} {
		if !strings.Contains(rules, w) {
			t.Errorf("cn_san_replace_rules lack %q: %s", w, rules)
		}
	}
	if fmt.Sprint(rc["ip"]) != "[192.168.50.10 fd00:50::10]" {
		t.Errorf("recert config ip = %v", rc["ip"])
	}
	if _, err := os.Stat(filepath.Join(h.root, RecertConfigFile)); err == nil {
		t.Error("recert's configuration, which holds the pull secret, was left on the node")
	}
	// The real run took the dry run's steps, in its order.
	plan, err := Plan(h.options(oskind.OpenShift, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, s := range res.Steps {
		ran = append(ran, s.Name)
	}
	if !slices.Equal(ran, steps.Names(plan)) {
		t.Errorf("ran %q,\nthe dry run lists %q", ran, steps.Names(plan))
	}
	if s := h.read(t, DnsmasqOverridesFile); s != "SNO_CLUSTER_NAME_OVERRIDE=store-0042\nSNO_BASE_DOMAIN_OVERRIDE=edge.example.com\nSNO_DNSMASQ_IP_OVERRIDE=192.168.50.10\n" {
		t.Errorf("dnsmasq overrides %q", s)
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
	if m, _ := h.rep.step("recert", wire.StatusOK); m.Details["cluster"] != "store-0042.edge.example.com" || m.Details["extendExpiration"] != "true" {
		t.Errorf("recert report %v", m.Details)
	}
	// The pull secret never reaches a report or the console.
	for _, m := range h.rep.msgs {
		for _, v := range m.Details {
			if strings.Contains(v, `"auths"`) {
				t.Errorf("a report holds the pull secret: %v", m.Details)
			}
		}
	}
	if strings.Contains(h.console.String(), `"auths"`) {
		t.Error("the console shows the pull secret")
	}
}

// checkRecertArgs checks a command line against recert's recorded CLI contract.
func checkRecertArgs(t *testing.T, args []string, exists func(string) bool) {
	t.Helper()
	if err := recert.Check(args, exists); err != nil {
		t.Error(err)
	}
}

// recert's CN/SAN rules follow lifecycle-agent's: system:node: gets its own rule, since
// recert matches whole names; a pinned node IP gets none.
func TestCNSANRules(t *testing.T) {
	seed := Identity{ClusterName: "seed", BaseDomain: "factory.example", Hostname: "seed-node", IPs: []string{"192.168.127.10", "fd00:127::10"}}
	for _, tc := range []struct {
		name       string
		site       Identity
		want, none []string
	}{
		{"everything changes", Identity{ClusterName: "store-1", BaseDomain: "edge.example", Hostname: "sno-1", IPs: []string{"10.1.0.5", "fd00:1::5"}},
			[]string{"system:node:seed-node,system:node:sno-1", "seed-node,sno-1", "api.seed.factory.example,api.store-1.edge.example",
				"api-int.seed.factory.example,api-int.store-1.edge.example", "*.apps.seed.factory.example,*.apps.store-1.edge.example",
				"192.168.127.10,10.1.0.5", "fd00:127::10,fd00:1::5"}, nil},
		{"hostname only", Identity{ClusterName: "seed", BaseDomain: "factory.example", Hostname: "sno-2", IPs: seed.IPs},
			[]string{"system:node:seed-node,system:node:sno-2"}, []string{"api.seed.factory.example,api.seed.factory.example"}},
		{"pinned node IP", Identity{ClusterName: "seed", BaseDomain: "other.example", Hostname: "seed-node"},
			[]string{"api-int.seed.factory.example,api-int.seed.other.example"}, []string{"192.168.127.10,", "system:node:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := cnSANRules(siteIdentity{seed: seed, site: tc.site})
			var args []string
			for _, r := range rules {
				args = append(args, "--cn-san-replace", r)
			}
			checkRecertArgs(t, args, nil)
			line := strings.Join(rules, " ")
			for _, w := range tc.want {
				if !slices.Contains(rules, w) {
					t.Errorf("lacks %q:\n%s", w, line)
				}
			}
			for _, n := range tc.none {
				if strings.Contains(line, n) {
					t.Errorf("has %q:\n%s", n, line)
				}
			}
		})
	}
}

// The dry run needs no node and no medium: it lists the post-pivot steps, recert with its
// settings as recert's flags (secrets as placeholders), the cluster ID and the waits.
func TestOpenShiftPlan(t *testing.T) {
	plan, err := Plan(Options{Root: t.TempDir(), Target: oskind.OpenShift}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"medium", "network", "hostname", "dns", "ntp", "pull-secret", "mirrors", "ssh-keys", "dnsmasq", "recert", "kubelet", "api",
		"old-mirrors", "manifests", "cluster-id", "wait-cluster-version", "wait-cluster-operators", "wait-node", "reconfigure-disable"}
	if got := steps.Names(plan); !slices.Equal(got, want) {
		t.Fatalf("plan %q,\nwant %q", got, want)
	}
	i := slices.Index(steps.Names(plan), "recert")
	for _, w := range []string{"--pull-secret <", "--kubeadmin-password-hash <site kubeadmin password hash>",
		"--cluster-rename <site cluster>:<site domain>:<new infra ID>", "--cn-san-replace system:node:<seed hostname>,system:node:<site hostname>",
		"--extend-expiration"} {
		if !strings.Contains(plan[i].Detail, w) {
			t.Errorf("recert step lacks %q: %s", w, plan[i].Detail)
		}
	}
	// With a real site config the secret is redacted.
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err = Plan(Options{Root: t.TempDir(), Target: oskind.OpenShift}, sc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plan)
	if strings.Contains(string(b), "auths") {
		t.Errorf("the dry run shows the pull secret: %s", b)
	}
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

// A site config with retained crypto (site-config create makes it) has recert sign with the
// site's own keys and take the admin CA whole, so the kubeconfig made for the site works;
// the keys are written 0600 first.
func TestOpenShiftRetainedCrypto(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	var recertConfig []byte
	o := h.options(oskind.OpenShift, medium(t, "site.yaml", func(sc *siteconfig.SiteConfig) {
		if _, err := siteconfig.MakeCredentials(sc, nil, time.Now(), true); err != nil {
			t.Fatal(err)
		}
	}))
	o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if slices.Contains(args, "RECERT_CONFIG="+RecertConfigFile) {
			recertConfig, _ = os.ReadFile(filepath.Join(h.root, RecertConfigFile))
		}
		return h.cmds.run(ctx, name, args...)
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, h.console.String())
	}
	var rc struct {
		UseKey  []string `json:"use_key_rules"`
		UseCert []string `json:"use_cert_rules"`
		Hash    string   `json:"kubeadmin_password_hash"`
	}
	if err := json.Unmarshal(recertConfig, &rc); err != nil {
		t.Fatal(err)
	}
	want := []string{"kube-apiserver-lb-signer " + KubeconfigCryptoDir + "/loadbalancer-serving-signer.key",
		"kube-apiserver-localhost-signer " + KubeconfigCryptoDir + "/localhost-serving-signer.key",
		"kube-apiserver-service-network-signer " + KubeconfigCryptoDir + "/service-network-serving-signer.key"}
	if !slices.Equal(rc.UseKey, want) || !slices.Equal(rc.UseCert, []string{KubeconfigCryptoDir + "/admin-kubeconfig-client-ca.crt"}) || !strings.HasPrefix(rc.Hash, "$2a$") {
		t.Errorf("recert config %s", recertConfig)
	}
	for _, f := range []string{"loadbalancer-serving-signer.key", "admin-kubeconfig-client-ca.crt"} {
		fi, err := os.Stat(filepath.Join(h.root, KubeconfigCryptoDir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, fi, err)
		}
	}
}
