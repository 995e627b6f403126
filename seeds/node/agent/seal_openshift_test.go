package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/seedinfo"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

// Secrets the factory's cluster holds; none may be left in a sealed seed.
const (
	buildPullSecret   = `{"auths":{"quay.io":{"auth":"QlVJTERQVUxMU0VDUkVULXRva2VuLTQyOmJ1aWxk"}}}`
	buildSecretToken  = "QlVJTERQVUxMU0VDUkVULXRva2VuLTQyOmJ1aWxk"
	factoryAdminHash  = "$2a$10$FACTORYKUBEADMINHASHxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	recertImageForTst = "quay.io/edge-infrastructure/recert@sha256:1111"
	etcdImageForTst   = "quay.io/openshift-release-dev/etcd@sha256:2222"
)

type exitErr int

func (e exitErr) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitErr) ExitCode() int { return int(e) }

// sealNode is a recording stand-in for the node's commands (oc, systemctl, crictl, podman).
// No OpenShift node runs here, so the parts of the cluster the seal relies on act as the
// upstream code they stand for does: setting the pull secret through the API rewrites the
// etcd stand-in file (kube-apiserver), and after two polls the MCO stand-in writes the
// placeholder to config.json and currentconfig and readies the pool (the MCO's rollout);
// recert's stand-in writes its clean summary and the kubeadmin hash it was given into the
// etcd stand-in (recert's kubeadmin_password_hash).
type sealNode struct {
	t      *testing.T
	root   string
	cmds   [][]string
	polls  int  // MachineConfigPool reads after the placeholder went in
	set    bool // the placeholder went in
	never  bool // the MCO never rolls the placeholder out
	crioUp bool
}

func (n *sealNode) etcdFile() string { return filepath.Join(n.root, "var/lib/etcd/member/snap/db") }

func (n *sealNode) write(p, body string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(n.root, p)), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.root, p), []byte(body), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

func newSealNode(t *testing.T) *sealNode {
	n := &sealNode{t: t, root: t.TempDir(), crioUp: true}
	for p, body := range map[string]string{
		"etc/hostname":                                                     "localhost.localdomain\n", // not the node's name: the seal must not read it
		"etc/machine-id":                                                   "0123456789abcdef\n",
		"etc/ssh/ssh_host_ed25519_key":                                     "k",
		"var/lib/kubelet/config.json":                                      buildPullSecret,
		"etc/machine-config-daemon/currentconfig":                          `{"spec":{"config":{"storage":{"files":[{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,` + buildPullSecret + `"}}]}}}}`,
		"etc/mcs-machine-config-content.json":                              `{"pull":"` + buildSecretToken + `"}`,
		"var/lib/etcd/member/snap/db":                                      "secret/openshift-config/pull-secret=" + buildPullSecret + "\nsecret/kube-system/kubeadmin=" + factoryAdminHash + "\n",
		"etc/kubernetes/manifests/etcd-pod.yaml":                           "etcd",
		"var/lib/ovn-ic/etc/ovnkube-node-certs/ovnkube-client-current.pem": "c",
		"etc/cni/multus/certs/multus-client-current.pem":                   "c",
		"var/log/journal/x/system.journal":                                 "j",
		"etc/default/nodeip-configuration":                                 "KUBELET_NODEIP_HINT=192.168.127.0\n",
	} {
		n.write(p, body)
	}
	return n
}

func (n *sealNode) run(_ context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	n.cmds = append(n.cmds, argv)
	line := strings.Join(argv, " ")
	switch {
	case name == "oc" && strings.Contains(line, "--raw /readyz"):
		if len(n.cmds) < 2 {
			return nil, errors.New("connection refused")
		}
		return []byte("ok"), nil
	case name == "oc" && strings.Contains(line, "clusterversion.config.openshift.io/version"):
		return clusterObjects(n.t), nil
	case name == "oc" && strings.Contains(line, "get nodes"):
		return []byte(`{"kind":"List","items":[{"kind":"Node","metadata":{"name":"seed-node"},"status":{"addresses":[
			{"type":"InternalIP","address":"fd00:127::10"},{"type":"InternalIP","address":"192.168.127.10"},{"type":"Hostname","address":"seed-node"}]}}]}`), nil
	case name == "oc" && strings.Contains(line, "secret/router-ca"):
		return routerCA(n.t), nil
	case name == "oc" && strings.Contains(line, "set data secret/pull-secret"):
		from := strings.TrimPrefix(argv[len(argv)-1], "--from-file=.dockerconfigjson=")
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, err
		}
		etcd, _ := os.ReadFile(n.etcdFile())
		os.WriteFile(n.etcdFile(), bytes.ReplaceAll(etcd, []byte(buildPullSecret), b), 0o600)
		n.set = true
		return nil, nil
	case name == "oc" && strings.Contains(line, "get machineconfigpools"):
		ready := 1
		if n.set && !n.never {
			n.polls++
			if n.polls == 2 { // the MCO's rollout lands
				n.write("var/lib/kubelet/config.json", PlaceholderPullSecret)
				n.write("etc/machine-config-daemon/currentconfig", `{"spec":{"config":{"storage":{"files":[{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,`+PlaceholderPullSecret+`"}}]}}}}`)
				n.write("etc/mcs-machine-config-content.json", `{"pull":"placeholder"}`)
			}
			if n.polls < 2 {
				ready = 0
			}
		}
		return fmt.Appendf(nil, `{"items":[{"metadata":{"name":"master"},"spec":{"configuration":{"name":"rendered-master-new"}},
			"status":{"configuration":{"name":"rendered-master-new"},"machineCount":1,"readyMachineCount":%d}}]}`, ready), nil
	case name == "oc" && strings.Contains(line, "get machineconfigs"):
		return []byte(`{"items":[{"metadata":{"name":"00-master"}},{"metadata":{"name":"rendered-master-old"}},{"metadata":{"name":"rendered-master-new"}}]}`), nil
	case name == "oc" && strings.Contains(line, "delete"):
		return nil, nil
	case line == "systemctl is-active crio":
		if !n.crioUp {
			return nil, exitErr(3)
		}
		return []byte("active\n"), nil
	case line == "crictl ps -q":
		return []byte("c1\nc2\n"), nil
	case line == "crictl pods -q":
		return []byte("p1\np2\n"), nil
	case line == "crictl rmp -f p2":
		return nil, errors.New("sandbox p2: network teardown failed")
	case name == "podman" && slices.Contains(argv, "--env"):
		i := slices.IndexFunc(argv, func(a string) bool { return strings.HasPrefix(a, "RECERT_CONFIG=") })
		cfgPath := filepath.Join(n.root, strings.TrimPrefix(argv[i], "RECERT_CONFIG="))
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			return nil, fmt.Errorf("recert: %w", err)
		}
		var cfg struct {
			Hash string `json:"kubeadmin_password_hash"`
		}
		json.Unmarshal(b, &cfg)
		etcd, _ := os.ReadFile(n.etcdFile())
		os.WriteFile(n.etcdFile(), bytes.ReplaceAll(etcd, []byte(factoryAdminHash), []byte(cfg.Hash)), 0o600)
		n.write(RecertSeedSummary[1:], "cluster_crypto: {}\n")
		return nil, nil
	}
	return nil, nil
}

func clusterObjects(t *testing.T) []byte {
	ic := "apiVersion: v1\nbaseDomain: factory.example\nmetadata:\n  name: seed\nnetworking:\n  machineNetwork:\n  - cidr: 192.168.127.0/24\n"
	b, err := json.Marshal(map[string]any{"kind": "List", "items": []any{
		map[string]any{"kind": "ClusterVersion", "metadata": map[string]any{"name": "version"}, "spec": map[string]any{"clusterID": "11111111-2222-4333-8444-555555555555"},
			"status": map[string]any{"desired": map[string]any{"version": "4.20.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:aa"}}},
		map[string]any{"kind": "Infrastructure", "metadata": map[string]any{"name": "cluster"}, "status": map[string]any{"infrastructureName": "seed-x7k2p"}},
		map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "cluster-config-v1"}, "data": map[string]string{"install-config": ic}},
		map[string]any{"kind": "Secret", "metadata": map[string]any{"name": "kubeadmin"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func routerCA(t *testing.T) []byte {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ingress-operator@1700000000"},
		NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1700000000, 0).Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return fmt.Appendf(nil, `{"data":{"tls.crt":%q}}`, base64.StdEncoding.EncodeToString(crt))
}

func (n *sealNode) sealer() Sealer {
	return Sealer{Root: n.root, Run: n.run, Clock: clocktest.New(time.Unix(1_800_000_000, 0)),
		Request: wire.SealRequest{Version: 1, Target: "openshift", RecertImage: recertImageForTst, EtcdImage: etcdImageForTst,
			RequiredFiles: []string{"/etc/default/nodeip-configuration"}}}
}

// index is where the first command starting with prefix ran, -1 if none did.
func (n *sealNode) index(prefix string) int {
	return slices.IndexFunc(n.cmds, func(c []string) bool { return strings.HasPrefix(strings.Join(c, " "), prefix) })
}

// The OpenShift seal takes lifecycle-agent's steps in lifecycle-agent's order, runs exactly
// the list its dry run prints, and leaves neither the build's pull secret nor the
// factory's kubeadmin password anywhere in the sealed tree.
func TestSealOpenShiftFollowsLCA(t *testing.T) {
	n := newSealNode(t)
	s := n.sealer()
	done, err := s.Seal(context.Background())
	if err != nil {
		t.Fatalf("seal: %v\ncommands: %q", err, n.cmds)
	}
	plan := s.Plan()
	if got, want := names(done), planNames(plan); !slices.Equal(got, want) {
		t.Errorf("ran %q,\nthe dry run lists %q", got, want)
	}
	// Every command the plan shows ran, in the plan's order.
	at := 0
	for _, st := range plan {
		if len(st.Argv) == 0 || st.Name == "recert-etcd-stop" {
			continue
		}
		want := strings.Join(st.Argv, " ")
		if st.Name == "recert" { // its config path and mounts are the plan's; compare the head
			want = strings.Join(st.Argv[:8], " ")
		}
		i := slices.IndexFunc(n.cmds[at:], func(c []string) bool { return strings.HasPrefix(strings.Join(c, " "), want) })
		if i < 0 {
			t.Fatalf("step %s: %q did not run after command %d:\n%q", st.Name, want, at, n.cmds)
		}
		at += i + 1
	}
	// lifecycle-agent's order (OPENSHIFT-SEED.md 1b.5-6, then 1c.6, then 1c.7): the pull
	// secret is replaced through the API while the cluster runs; then kubelet is stopped
	// and disabled first, containers stopped, sandboxes removed, CRI-O stopped; then recert.
	order := []string{
		"oc --kubeconfig " + filepath.Join(n.root, LocalhostKubeConfig) + " -n openshift-config set data secret/pull-secret",
		"oc --kubeconfig " + filepath.Join(n.root, LocalhostKubeConfig) + " delete machineconfigs.machineconfiguration.openshift.io rendered-master-old",
		"systemctl stop kubelet.service", "systemctl disable kubelet.service", "systemctl is-active crio",
		"crictl ps -q", "crictl stop --timeout 5 c1", "crictl stop --timeout 5 c2",
		"crictl pods -q", "crictl rmp -f p1", "crictl rmp -f p2", "systemctl stop crio.service",
		"podman run --detach --rm --replace --name snofactory-recert-etcd", "curl --silent --fail --max-time 5 http://localhost:2379/health",
		"podman run --rm --replace --name snofactory-recert", "podman stop snofactory-recert-etcd",
		"systemctl enable snofactory-reconfigure.service",
	}
	last := -1
	for _, o := range order {
		i := n.index(o)
		if i <= last {
			t.Errorf("%q ran at %d, want after %d:\n%q", o, i, last, n.cmds)
		}
		last = i
	}
	if i := n.index("oc --kubeconfig " + filepath.Join(n.root, LocalhostKubeConfig) + " delete machineconfigs.machineconfiguration.openshift.io rendered-master-old"); i >= 0 &&
		slices.Contains(n.cmds[i], "rendered-master-new") {
		t.Error("the rendered config the pool uses was deleted")
	}
	if slices.ContainsFunc(n.cmds, func(c []string) bool { return strings.Join(c, " ") == "systemctl disable crio.service" }) {
		t.Error("CRI-O was disabled: lifecycle-agent only stops it")
	}

	// The identity comes from the cluster's objects.
	info, err := seedinfo.Read(filepath.Join(n.root, seedinfo.File))
	if err != nil {
		t.Fatal(err)
	}
	if info.Hostname != "seed-node" || info.ClusterName != "seed" || info.BaseDomain != "factory.example" ||
		!slices.Equal(info.NodeIPs, []string{"192.168.127.10", "fd00:127::10"}) || info.InfraID != "seed-x7k2p" ||
		info.ClusterID != "11111111-2222-4333-8444-555555555555" || info.IngressCertificateCN != "ingress-operator@1700000000" ||
		info.OCPVersion != "4.20.3" || info.RecertImage != recertImageForTst {
		t.Errorf("seed info = %+v", info)
	}

	// The seed-time recert forced expiry, defragmented etcd and left a disposable hash.
	cfg, err := os.ReadFile(filepath.Join(n.root, SealWorkDir, "recert_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		ForceExpire bool   `json:"force_expire"`
		Defrag      bool   `json:"etcd_defrag"`
		Hash        string `json:"kubeadmin_password_hash"`
		Summary     string `json:"summary_file_clean"`
		Extend      bool   `json:"extend_expiration"`
	}
	if err := json.Unmarshal(cfg, &rc); err != nil {
		t.Fatal(err)
	}
	if !rc.ForceExpire || !rc.Defrag || rc.Extend || rc.Summary != RecertSeedSummary {
		t.Errorf("recert config %s", cfg)
	}
	if _, err := bcrypt.Cost([]byte(rc.Hash)); err != nil || rc.Hash == factoryAdminHash {
		t.Errorf("kubeadmin hash %q is not a fresh bcrypt hash: %v", rc.Hash, err)
	}
	if fi, err := os.Stat(filepath.Join(n.root, SealWorkDir, "recert_config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("recert config mode: %v %v", fi.Mode(), err)
	}

	// The unit the site runs, outside MachineConfigs.
	unit, err := os.ReadFile(filepath.Join(n.root, ReconfigureUnitPath))
	if err != nil || !bytes.Contains(unit, []byte("ExecStart="+AgentPath+" agent reconfigure")) {
		t.Errorf("reconfigure unit: %s %v", unit, err)
	}

	// Per-node state as upstream lists it.
	for _, gone := range []string{"var/lib/ovn-ic/etc/ovnkube-node-certs/ovnkube-client-current.pem", "etc/cni/multus/certs/multus-client-current.pem",
		"var/log/journal/x/system.journal", "etc/ssh/ssh_host_ed25519_key"} {
		if _, err := os.Stat(filepath.Join(n.root, gone)); err == nil {
			t.Errorf("%s survived the seal", gone)
		}
	}

	// Secret scan: neither the build's pull secret nor the factory's kubeadmin hash is
	// anywhere in the sealed tree, the etcd stand-in included.
	filepath.WalkDir(n.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, secret := range []string{buildSecretToken, factoryAdminHash} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s still holds %.12s…", p, secret)
			}
		}
		return nil
	})
}

// The scan can fail: before the seal the tree holds both secrets.
func TestSealSecretScanCanFail(t *testing.T) {
	n := newSealNode(t)
	etcd, _ := os.ReadFile(n.etcdFile())
	if !bytes.Contains(etcd, []byte(buildSecretToken)) || !bytes.Contains(etcd, []byte(factoryAdminHash)) {
		t.Fatal("the stand-in etcd does not hold the secrets the scan looks for")
	}
}

// When the MCO never rolls the placeholder out, the seal stops before anything is
// stopped or removed, and says why.
func TestSealOpenShiftRolloutTimeout(t *testing.T) {
	n := newSealNode(t)
	n.never = true
	_, err := n.sealer().Seal(context.Background())
	if err == nil || !strings.Contains(err.Error(), "pull-secret-rollout") || !strings.Contains(err.Error(), "not rolled out within 10m0s") {
		t.Fatalf("seal = %v", err)
	}
	if i := n.index("systemctl stop kubelet.service"); i >= 0 {
		t.Error("kubelet was stopped after the rollout failed")
	}
	if _, err := os.Stat(filepath.Join(n.root, "var/log/journal/x/system.journal")); err != nil {
		t.Error("files were removed after the rollout failed")
	}
}

// CRI-O already down (systemctl is-active exits 3): containers, sandboxes and the CRI-O
// stop are skipped, as upstream does.
func TestSealOpenShiftCRIODown(t *testing.T) {
	n := newSealNode(t)
	n.crioUp = false
	if _, err := n.sealer().Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"crictl", "systemctl stop crio.service"} {
		if n.index(c) >= 0 {
			t.Errorf("%s ran with CRI-O down", c)
		}
	}
}

// A blueprint that keeps the pull secret skips the sanitising through the API.
func TestSealOpenShiftKeepsPullSecret(t *testing.T) {
	n := newSealNode(t)
	s := n.sealer()
	s.Request.KeepPullSecret = true
	if _, err := s.Seal(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.index("oc --kubeconfig "+filepath.Join(n.root, LocalhostKubeConfig)+" -n openshift-config set data") >= 0 {
		t.Error("the pull secret was replaced although the blueprint keeps it")
	}
}

// The dry run needs no node: it lists the upstream order with each step's command.
func TestSealPlanOpenShift(t *testing.T) {
	plan := Sealer{Request: wire.SealRequest{Version: 1, Target: "openshift", RecertImage: "<recert image>", EtcdImage: "<etcd image>"}}.Plan()
	got := planNames(plan)
	want := []string{"relocation-config", "api", "read-cluster", "read-node", "seed-identity", "pull-secret-placeholder",
		"pull-secret-rollout", "old-rendered-configs", "kubelet-stop", "kubelet-disable", "crio-active", "containers-stop",
		"sandboxes-remove", "crio-stop", "recert-etcd", "recert", "recert-etcd-stop", "per-node-state", "machine-id",
		"ssh-host-keys", "pull-secret", "reconfigure-images", "reconfigure-unit", "reconfigure-enable", "sealed"}
	if !slices.Equal(got, want) {
		t.Errorf("plan %q,\nwant %q", got, want)
	}
	for _, st := range plan {
		if st.Name == "recert" && !slices.Contains(st.Argv, "RECERT_CONFIG="+SealWorkDir+"/recert_config.json") {
			t.Errorf("recert step argv %q", st.Argv)
		}
	}
}

func names(done []SealStep) []string {
	out := make([]string, len(done))
	for i, d := range done {
		out[i] = d.Name
	}
	return out
}

func planNames(plan []steps.Step) []string {
	out := make([]string, len(plan))
	for i, s := range plan {
		out[i] = s.Name
	}
	return out
}
