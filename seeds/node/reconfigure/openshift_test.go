package reconfigure

import (
	"context"
	"encoding/json"
	"errors"
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
		// The unit files the hook's systemctl calls name: RHCOS's own, the MachineConfigs'
		// (kubelet, render's dnsmasq) and the seal's hook, still enabled; the seal disabled kubelet.
		TrustExtractedDir + "pem/.keep":                                           "",
		"/usr/lib/systemd/system/chronyd.service":                                 "",
		"/usr/lib/systemd/system/" + NetworkManagerUnit:                           "",
		OVSConfigurationUnitFile:                                                  "",
		"/usr/lib/systemd/system/crio.service":                                    "",
		"/etc/systemd/system/kubelet.service":                                     "",
		"/etc/systemd/system/dnsmasq.service":                                     "",
		"/etc/systemd/system/" + wire.ReconfigureUnitName:                         "",
		"/etc/systemd/system/multi-user.target.wants/" + wire.ReconfigureUnitName: "",
		DefaultKubeConfig:                                                         "apiVersion: v1\nkind: Config\n",
		"/var/lib/kubelet/config.json":                                            `{"auths":{"placeholder":{"auth":"c2VhbGVkOnNlZWQ="}}}`,
		"/etc/machine-config-daemon/currentconfig":                                "{}",
		// The seal keeps the factory's host keys for the site's recert to replace.
		"/etc/ssh/ssh_host_ed25519_key":     "factory ed25519",
		"/etc/ssh/ssh_host_ed25519_key.pub": "factory ed25519 pub",
		"/etc/ssh/ssh_host_rsa_key":         "factory rsa",
		"/etc/ssh/ssh_host_rsa_key.pub":     "factory rsa pub",
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
	// oc get -o json as the API serves them: a List in name order, each object with every
	// condition its operator sets (the CVO's RetrievedUpdates is False without a channel, and
	// says nothing about readiness).
	h.cmds.outputs["oc --kubeconfig "+kc+" get clusterversion.config.openshift.io version -o json"] = `{"apiVersion":"config.openshift.io/v1","kind":"ClusterVersion",
		"metadata":{"name":"version"},"spec":{"clusterID":"00000000-0000-4000-8000-000000000000"},"status":{"conditions":[
		{"type":"RetrievedUpdates","status":"False","reason":"NoChannel","message":"The update channel has not been configured."},
		{"type":"ReleaseAccepted","status":"True","reason":"PayloadLoaded"},
		{"type":"Available","status":"True","message":"Done applying 4.20.3"},{"type":"Failing","status":"False"},
		{"type":"Progressing","status":"False","message":"Cluster version is 4.20.3"}]}}`
	var cos []string
	for _, name := range []string{"authentication", "etcd", "kube-apiserver", "machine-config", "network"} {
		cos = append(cos, `{"apiVersion":"config.openshift.io/v1","kind":"ClusterOperator","metadata":{"name":"`+name+`"},"status":{"conditions":[
		{"type":"Degraded","status":"False","reason":"AsExpected"},{"type":"Progressing","status":"False","reason":"AsExpected","lastTransitionTime":"`+settled+`"},
		{"type":"Available","status":"True","reason":"AsExpected"},{"type":"Upgradeable","status":"True"},{"type":"EvaluationConditionsDetected","status":"False"}]}}`)
	}
	h.cmds.outputs["oc --kubeconfig "+kc+" get clusteroperators.config.openshift.io -o json"] = `{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[` +
		strings.Join(cos, ",") + `]}`
	h.cmds.outputs["oc --kubeconfig "+kc+" get nodes -o json"] = nodeList("sno-0042", "Done", "")
	h.cmds.outputs["oc --kubeconfig "+kc+" get machineconfigpools.machineconfiguration.openshift.io -o json"] = readTestdata(t, "machineconfigpools-updated.json")
}

// nodeList is oc get nodes -o json for one Ready node whose machine-config daemon is in
// state (pkg/daemon/constants/constants.go: Done, Working, Degraded) with reason, as the MCD
// annotates it (pkg/daemon/daemon.go updateState, on_disk_validation.go for the reason).
func nodeList(name, state, reason string) string {
	const rendered = "rendered-master-5f1c3a9e2b7d4c8f0a6e1d2b3c4f5a6b"
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]string{"resourceVersion": ""},
		"items": []any{map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "annotations": map[string]string{
				"machineconfiguration.openshift.io/controlPlaneTopology": "SingleReplica",
				"machineconfiguration.openshift.io/currentConfig":        rendered,
				"machineconfiguration.openshift.io/desiredConfig":        rendered,
				"machineconfiguration.openshift.io/desiredDrain":         "uncordon-" + rendered,
				"machineconfiguration.openshift.io/lastAppliedDrain":     "uncordon-" + rendered,
				"machineconfiguration.openshift.io/reason":               reason,
				"machineconfiguration.openshift.io/state":                state,
				"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
			"status": map[string]any{"conditions": []any{
				map[string]string{"type": "MemoryPressure", "status": "False"},
				map[string]string{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}}}}}})
	return string(b)
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
		"systemctl restart NetworkManager.service",
		"systemctl restart ovs-configuration.service",
		"hostnamectl set-hostname sno-0042",
		"systemctl restart chronyd.service",
		"systemctl restart dnsmasq.service",
		"podman run --detach --rm --replace --name snofactory-recert-etcd --network=host --privileged --entrypoint etcd -v " +
			r("/var/lib/etcd") + ":/store quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222 --name editor --data-dir /store",
		"curl --silent --fail --max-time 5 http://localhost:2379/health",
		"", // recert: checked below
		"podman stop snofactory-recert-etcd",
		"update-ca-trust", // after recert, as lifecycle-agent's postRecertCommands
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
		"oc --kubeconfig " + kc + " get machineconfigpools.machineconfiguration.openshift.io -o json",
		"oc --kubeconfig " + kc + " get nodes -o json",
		"oc --kubeconfig " + kc + " get clusterversion.config.openshift.io version -o json",
		"oc --kubeconfig " + kc + " get clusteroperators.config.openshift.io -o json",
		"oc --kubeconfig " + kc + " get nodes -o json",
		"systemctl disable snofactory-reconfigure.service",
	}
	got := slices.Clone(h.cmds.lines)
	if len(got) != len(want) {
		t.Fatalf("commands:\n%s", strings.Join(got, "\n"))
	}
	recert := slices.Index(want, "")
	recertLine := got[recert]
	got[recert] = ""
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
	if ps, _ := rc["pull_secret"].(string); !strings.Contains(ps, `"auths"`) || ps != h.read(t, OpenShiftPullSecretFile) {
		t.Errorf("recert config pull_secret = %q, the pull-secret step wrote %q", ps, h.read(t, OpenShiftPullSecretFile))
	}
	// The MachineConfigs' copies of the files the site writes (MachineConfigRewrites) get
	// exactly what the steps wrote.
	if cc, _ := rc["chrony_config"].(string); cc == "" || cc != h.read(t, ChronyConf) {
		t.Errorf("recert config chrony_config = %q, the ntp step wrote %q", cc, h.read(t, ChronyConf))
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
	if fi, err := os.Stat(filepath.Join(h.root, DnsmasqOverridesFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("dnsmasq overrides mode: %v, %v; want 0600 as lifecycle-agent writes it", fi.Mode(), err)
	}
	// The network state nmstatectl gets is the whole nmstate document, its resolver
	// included, as lifecycle-agent applies raw_nm_state_config; the dns step has nothing
	// left to do.
	var state map[string]any
	if err := yaml.Unmarshal([]byte(h.read(t, OpenShiftNetworkFile)), &state); err != nil || state["interfaces"] == nil || state["dns-resolver"] == nil {
		t.Errorf("network state %v (%v)", state, err)
	}
	if _, err := os.Stat(r(OpenShiftDNSFile)); err == nil {
		t.Errorf("the dns step applied the resolver a second time")
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
	// What the tools left on the node: recert replaced the seed's host keys type for type,
	// kubelet is enabled again and the hook is not.
	for _, k := range []string{"/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_rsa_key.pub"} {
		if got := h.read(t, k); !strings.HasPrefix(got, "regenerated by recert") {
			t.Errorf("%s = %q: recert did not replace the factory's host key", k, got)
		}
	}
	if _, err := os.Lstat(r(KubeletWantsLink)); err != nil {
		t.Errorf("kubelet not enabled: %v", err)
	}
	if _, err := os.Lstat(r(ReconfigureWantsLink)); err == nil {
		t.Error("the hook is still enabled")
	}
	if h.read(t, "/etc/hostname") != "sno-0042\n" || !strings.Contains(h.read(t, NMConnectionsDir+"ens3.nmconnection"), "interface-name=ens3") {
		t.Errorf("hostname %q, or no keyfile for ens3", h.read(t, "/etc/hostname"))
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
	want := []string{"medium", "container-storage", "network", "hostname", "dns", "ntp", "pull-secret", "mirrors", "ssh-keys", "dnsmasq", "ssh-host-keys", "trust-bundle", "recert", "trust-store", "kubelet", "api",
		"old-mirrors", "manifests", "cluster-id", "node-labels", "wait-machine-config", "wait-cluster-version", "wait-cluster-operators", "wait-node", "reconfigure-disable"}
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

// A seed whose /etc/ssh holds no host keys (sealed before the seal kept them) gets fresh ones
// from ssh-keygen -A before recert, which stops on none after it has changed the files on
// disk (recert src/server_ssh_keys.rs remove_old_keys, src/recert.rs finalize); when that
// fails, recert never runs.
func TestOpenShiftHostKeys(t *testing.T) {
	for _, tc := range []struct {
		name, failOn, err string
	}{
		{"generated, then replaced by recert", "", ""},
		{"ssh-keygen fails", "ssh-keygen", "step ssh-host-keys: making SSH host keys for recert to replace (/etc/ssh has none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			openshiftNode(t, h)
			keys, _ := filepath.Glob(filepath.Join(h.root, "/etc/ssh/ssh_host_*"))
			for _, k := range keys {
				os.Remove(k)
			}
			h.cmds.failOn = tc.failOn
			_, err := Run(context.Background(), h.options(oskind.OpenShift, medium(t, "site.yaml", nil)))
			keygen := slices.Index(h.cmds.lines, "ssh-keygen -A -f "+h.root)
			recertAt := slices.IndexFunc(h.cmds.lines, func(l string) bool { return strings.Contains(l, "--name snofactory-recert ") })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || recertAt >= 0 {
					t.Fatalf("err = %v, recert ran: %v; want %q", err, recertAt >= 0, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, h.console.String())
			}
			if keygen < 0 || recertAt < keygen {
				t.Errorf("ssh-keygen at %d, recert at %d:\n%s", keygen, recertAt, strings.Join(h.cmds.lines, "\n"))
			}
			for _, typ := range []string{"rsa", "ecdsa", "ed25519"} {
				if got := h.read(t, "/etc/ssh/ssh_host_"+typ+"_key"); !strings.HasPrefix(got, "regenerated by recert") {
					t.Errorf("%s key = %q", typ, got)
				}
			}
		})
	}
}

// An OpenShift site config without a pull secret is refused before anything changes, naming
// the pull-secret step, as lifecycle-agent's createPullSecretFile refuses it; the dry run of
// such a config says so at that step.
func TestOpenShiftRefusesNoPullSecret(t *testing.T) {
	for _, tc := range []struct{ name, secret, step, want string }{
		{"none", "", StepPullSecret, "the site config gives no pull secret"},
		// The medium's own validation refuses what a file can say.
		{"empty auths", `{"auths":{}}`, StepMedium, `spec.pullSecret: the pull secret's "auths" is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			openshiftNode(t, h)
			// A hand-made medium: site-config create refuses the empty forms a file gives.
			sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "site.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			sc.Spec.PullSecret = tc.secret
			norm, _ := sc.Normalized()
			_, err = Run(context.Background(), h.options(oskind.OpenShift, rawMedium(t, siteconfig.VolumeLabel, string(norm))))
			var se *StepError
			if !errors.As(err, &se) || se.Step != tc.step || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was applied") {
				t.Fatalf("err = %v, want a refusal at step %s saying %q", err, tc.step, tc.want)
			}
			if len(h.cmds.lines) > 0 || h.read(t, "/etc/hostname") != "localhost\n" {
				t.Errorf("the node was changed: %q", h.cmds.lines)
			}
			if _, err := os.Stat(filepath.Join(h.root, DefaultStateDir)); err == nil {
				t.Error("progress was recorded")
			}
			if m, ok := h.rep.step(tc.step, wire.StatusFailed); !ok || !strings.Contains(m.Details[wire.DetailError], strings.TrimPrefix(tc.want, "spec.pullSecret: ")) {
				t.Errorf("no failed %s report: %v", tc.step, h.rep.msgs)
			}
			plan, err := Plan(h.options(oskind.OpenShift, ""), sc)
			if i := slices.Index(steps.Names(plan), StepPullSecret); err != nil || i < 0 ||
				!strings.Contains(plan[i].Detail, "the real run refuses this site config before its first step") || !strings.Contains(plan[i].Detail, strings.TrimPrefix(tc.want, "spec.pullSecret: ")) {
				t.Errorf("dry run: %v %+v", err, plan)
			}
		})
	}
}

// Each MachineConfig-owned file the site writes is in the Changes of the steps named for it,
// so a drift check reading the plan finds it, and the plan's Changes are node paths or API
// objects (KIND NAME), never prose.
func TestMachineConfigRewritesInPlan(t *testing.T) {
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Plan(Options{Root: t.TempDir(), Target: oskind.OpenShift}, sc)
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string][]string{}
	for _, s := range plan {
		changes[s.Name] = s.Changes
		for _, c := range s.Changes {
			kind, name, _ := strings.Cut(c, " ")
			if !strings.HasPrefix(c, "/") && (kind == "" || kind[0] < 'A' || kind[0] > 'Z' || name == "" || strings.Contains(name, " ")) {
				t.Errorf("step %s changes %q: neither a node path nor an API object", s.Name, c)
			}
		}
	}
	if !slices.Contains(changes["manifests"], "ConfigMap default/store-id") || !slices.Contains(changes["manifests"], "ImageDigestMirrorSet "+MirrorSetName) {
		t.Errorf("manifests step changes %q", changes["manifests"])
	}
	for _, w := range MachineConfigRewrites() {
		for _, st := range w.Steps {
			if !slices.ContainsFunc(changes[st], func(c string) bool { return c == w.Path || strings.HasSuffix(c, "/") && strings.HasPrefix(w.Path, c) }) {
				t.Errorf("%s is written by step %s, whose Changes %q do not list it", w.Path, st, changes[st])
			}
		}
		if w.Why == "" || w.Upstream == "" {
			t.Errorf("%s: no reason or upstream citation", w.Path)
		}
	}
}

// A far-edge site's network, a bond of two NICs with the cluster on a VLAN, dual-stack,
// goes to nmstatectl whole, as lifecycle-agent applies the image-based installer's; the
// profiles the node held before are gone, NetworkManager and ovs-configuration run again,
// and the keyfiles nmstate leaves bind the ports to the bond and the VLAN to its base.
func TestOpenShiftBondVLANNetwork(t *testing.T) {
	h := newHarness(t)
	openshiftNode(t, h)
	factory := []string{"br-ex.nmconnection", "ovs-if-phys0.nmconnection", "Wired connection 1.nmconnection"}
	for _, f := range factory {
		p := filepath.Join(h.root, NMConnectionsDir, f)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("[connection]\ninterface-name=ens3\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A seed built behind a proxy, as lifecycle-agent requires of a site with one.
	writeUnderRoot(t, h.root, seedinfo.File, `{"seed_cluster_ocp_version":"4.20.3","base_domain":"factory.example","cluster_name":"seed","node_ips":["192.168.127.10"],
		"sno_hostname":"seed-node","has_proxy":true,"has_fips":false,"machine_networks":["192.168.127.0/24"],
		"cluster_network_cidr":["10.128.0.0/14"],"service_network_cidr":["172.30.0.0/16"]}`)
	writeUnderRoot(t, h.root, "/etc/mco/proxy.env", "# Proxy environment variables will be populated in this file.\nHTTP_PROXY=http://factory-proxy:3128\nNO_PROXY=.factory.example\n")
	o := h.options(oskind.OpenShift, medium(t, "bond-vlan.yaml", func(sc *siteconfig.SiteConfig) {
		sc.Spec.PullSecret = `{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpzZWNyZXQ="}}}`
	}))
	var recertConfig []byte
	o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if slices.Contains(args, "RECERT_CONFIG="+RecertConfigFile) {
			recertConfig, _ = os.ReadFile(filepath.Join(h.root, RecertConfigFile))
		}
		return h.cmds.run(ctx, name, args...)
	}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
	}
	r := func(p string) string { return filepath.Join(h.root, p) }
	// The corporate CA: trusted on the node before recert (lifecycle-agent's
	// establishEarlyCertificateTrust), then recert's user_ca_bundle.
	ca, _ := os.ReadFile("../../site/siteconfig/testdata/corporate-ca.pem")
	trust, rec := slices.Index(h.cmds.lines, "update-ca-trust"), slices.IndexFunc(h.cmds.lines, func(l string) bool { return strings.Contains(l, "RECERT_CONFIG=") })
	if trust < 0 || rec < trust || !strings.Contains(h.read(t, TrustExtractedDir+"pem/tls-ca-bundle.pem"), strings.TrimSpace(string(ca))) {
		t.Errorf("the trust bundle is not trusted before recert:\n%s", strings.Join(h.cmds.lines, "\n"))
	}
	if fi, err := os.Stat(r(UserCABundleFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v (%v), want 0600 as lifecycle-agent writes it", UserCABundleFile, fi, err)
	}
	var rc map[string]any
	if err := json.Unmarshal(recertConfig, &rc); err != nil || strings.TrimSpace(fmt.Sprint(rc["user_ca_bundle"])) != strings.TrimSpace(string(ca)) {
		t.Errorf("recert config user_ca_bundle %v (%v)", rc["user_ca_bundle"], err)
	}
	checkSiteProxy(t, h, rc)
	if ips, _ := rc["ip"].([]any); len(ips) != 2 || ips[0] != "192.168.100.10" || ips[1] != "fd00:100::10" {
		t.Errorf("recert ip %v, want the VLAN's IPv4 then IPv6 address", rc["ip"])
	}
	apply := slices.Index(h.cmds.lines, "nmstatectl apply "+r(OpenShiftNetworkFile))
	if apply < 0 || !slices.Equal(h.cmds.lines[apply+1:apply+3], []string{"systemctl restart NetworkManager.service", "systemctl restart ovs-configuration.service"}) {
		t.Errorf("commands:\n%s", strings.Join(h.cmds.lines, "\n"))
	}
	if slices.Contains(h.cmds.lines, "nmstatectl apply "+r(OpenShiftDNSFile)) {
		t.Error("the resolver was applied apart from the network")
	}
	var state struct {
		Interfaces []map[string]any `yaml:"interfaces"`
		Routes     struct {
			Config []map[string]any `yaml:"config"`
		} `yaml:"routes"`
		DNS map[string]any `yaml:"dns-resolver"`
	}
	if err := yaml.Unmarshal([]byte(h.read(t, OpenShiftNetworkFile)), &state); err != nil || len(state.Interfaces) != 5 || len(state.Routes.Config) != 3 || state.DNS == nil {
		t.Fatalf("network state %+v (%v)", state, err)
	}
	if fi, err := os.Stat(r(OpenShiftNetworkFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("network state mode %v (%v), want 0600 as lifecycle-agent writes nmstate.yaml", fi.Mode(), err)
	}
	if ipv6 := state.Interfaces[3]["ipv6"].(map[string]any); ipv6["dhcp"] != false || ipv6["autoconf"] != false {
		t.Errorf("bond0.100 ipv6 %v: an explicit false must reach nmstate, which otherwise keeps the current setting", ipv6)
	}
	for _, f := range factory {
		if _, err := os.Stat(r(NMConnectionsDir + f)); err == nil {
			t.Errorf("the node's profile %s is still there", f)
		}
	}
	for file, want := range map[string][]string{
		"eno1":      {"type=ethernet", "master=bond0\nslave-type=bond", "mtu=9000", "[ipv4]\nmethod=disabled"},
		"bond0":     {"type=bond", "mode=802.3ad", "miimon=100", "lacp_rate=fast", "xmit_hash_policy=layer3+4"},
		"bond0.100": {"[vlan]\nid=100\nparent=bond0", "address1=192.168.100.10/24", "route1=0.0.0.0/0,192.168.100.1,100", "address1=fd00:100::10/64", "route1=::/0,fd00:100::1,100", "dns=fd00:100::1;"},
		"bond0.200": {"parent=bond0", "route1=10.50.0.0/16,10.200.0.1", "route1_options=table=200"},
	} {
		kf := h.read(t, NMConnectionsDir+file+".nmconnection")
		for _, w := range want {
			if !strings.Contains(kf, w) {
				t.Errorf("%s.nmconnection lacks %q:\n%s", file, w, kf)
			}
		}
	}
	m, _ := h.rep.step("network", wire.StatusOK)
	if m.Details["interfaces"] != "eno1,eno2,bond0,bond0.100,bond0.200" || m.Details["address.bond0.100"] != "192.168.100.10/24,fd00:100::10/64" ||
		m.Details["removedProfiles"] != "Wired connection 1.nmconnection,br-ex.nmconnection,ovs-if-phys0.nmconnection" {
		t.Errorf("network report %v", m.Details)
	}
	// The site's labels reach the node after the new cluster ID, as lifecycle-agent's
	// setNodeLabels puts them there.
	kc := filepath.Join(h.root, DefaultKubeConfig)
	label := `oc --kubeconfig ` + kc + ` patch node sno-0042 --type merge -p {"metadata":{"labels":{"node-role.kubernetes.io/edge":"","site.example.com/store":"0042"}}}`
	if i := slices.Index(h.cmds.lines, label); i < 0 || !strings.Contains(h.cmds.lines[i-1], "patch clusterversion") {
		t.Errorf("no node label patch after the cluster ID:\n%s", strings.Join(h.cmds.lines, "\n"))
	}
	if s := h.read(t, DnsmasqOverridesFile); !strings.Contains(s, "SNO_DNSMASQ_IP_OVERRIDE=192.168.100.10\n") {
		t.Errorf("dnsmasq overrides %q: the node IP is the VLAN's", s)
	}
}

// The kubelet's and the installer's own labels are left alone, as lifecycle-agent leaves
// them; a site with only those patches nothing.
func TestNodeLabelsLeaveKubeletLabels(t *testing.T) {
	cmds := &commands{outputs: map[string]string{}}
	r := &run{o: Options{Run: cmds.run}}
	sc := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "sno-1", NodeLabels: map[string]string{"kubernetes.io/hostname": "x", "node-role.kubernetes.io/master": ""}}}
	st := r.nodeLabelsStep(sc, func(a ...string) []string { return append([]string{"oc"}, a...) })
	d, err := st.apply(context.Background(), sc)
	if err != nil || len(cmds.lines) > 0 || st.Argv != nil || d["ignored"] != "kubernetes.io/hostname,node-role.kubernetes.io/master" {
		t.Errorf("details %v, err %v, ran %q, argv %q", d, err, cmds.lines, st.Argv)
	}
}

// checkSiteProxy: recert gets the site's proxy with noProxy completed as lifecycle-agent
// completes it (setProxyAndProxyStatus: the site's machine networks, not the seed's), spec
// and status alike; the corporate CA is the proxy's trusted CA by name, as
// "user-ca-bundle:"; the node's /etc/mco/proxy.env carries the status proxy after recert.
func checkSiteProxy(t *testing.T, h *harness, rc map[string]any) {
	t.Helper()
	const url = "http://proxy.store-0042.example.com:3128"
	no := ".cluster.local,.edge.example.com,.svc,10.128.0.0/14,127.0.0.1,172.30.0.0/16,192.168.100.0/24,api-int.store-0042.edge.example.com,fd00:100::/64,localhost"
	if want := url + "|" + url + "|" + no + "|" + url + "|" + url + "|" + no; rc["proxy"] != want {
		t.Errorf("recert proxy\n%v\nwant\n%s", rc["proxy"], want)
	}
	if rc["proxy_trusted_ca_bundle"] != "user-ca-bundle:" {
		t.Errorf("proxy_trusted_ca_bundle %q", rc["proxy_trusted_ca_bundle"])
	}
	want := "# Proxy environment variables will be populated in this file.\nHTTP_PROXY=" + url + "\nHTTPS_PROXY=" + url + "\nNO_PROXY=" + no + "\n"
	if got := h.read(t, "/etc/mco/proxy.env"); got != want {
		t.Errorf("/etc/mco/proxy.env\n%s\nwant\n%s", got, want)
	}
}

// writeUnderRoot replaces a file of the test node.
func writeUnderRoot(t *testing.T, root, p, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
