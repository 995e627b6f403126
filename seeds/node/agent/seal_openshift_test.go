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
	"fmt"
	"io/fs"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/crypto/bcrypt"

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

func clusterObjects(t *testing.T) []byte {
	ic := "apiVersion: v1\nbaseDomain: factory.example\nmetadata:\n  name: seed\nnetworking:\n  machineNetwork:\n  - cidr: 192.168.127.0/24\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostPrefix: 23\n  serviceNetwork:\n  - 172.30.0.0/16\n"
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
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"router-ca","namespace":"openshift-ingress-operator"},
		"type":"kubernetes.io/tls","data":{"tls.crt":%q,"tls.key":"LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCg=="}}`, base64.StdEncoding.EncodeToString(crt))
}

// The OpenShift seal takes lifecycle-agent's steps in lifecycle-agent's order, runs exactly
// the list its dry run prints, leaves every file a MachineConfig owns as the MCD expects
// it, and leaves neither the build's pull secret nor the factory's kubeadmin password
// anywhere in the sealed tree.
func TestSealOpenShiftFollowsLCA(t *testing.T) {
	n := newSealNode(t)
	s := n.sealer()
	var done []SealStep
	var err error
	// In a bubble, a seal that stops fewer containers at once than the stand-in holds
	// for fails at once as a deadlock instead of hanging the test.
	synctest.Test(t, func(*testing.T) {
		n.stopGate = make(chan struct{})
		done, err = s.Seal(context.Background())
	})
	if err != nil {
		t.Fatalf("seal: %v\ncommands: %q", err, n.commands())
	}
	plan := s.Plan()
	if got, want := names(done), planNames(plan); !slices.Equal(got, want) {
		t.Errorf("ran %q,\nthe dry run lists %q", got, want)
	}
	checkPlanRan(t, n, plan)
	checkLCAOrder(t, n)
	checkSeedInfo(t, n)
	checkSeedRecertConfig(t, n)
	checkSealedFiles(t, n)
	checkMCDSeesNoDrift(t, n.root)
	scanForSecrets(t, n.root)
	// Finished pods are gone from the seed's etcd (lifecycle-agent deletePodsWithPhase); the
	// running one stays.
	for k, phase := range n.etcd {
		if strings.HasPrefix(k, "pod/") && phase != "Running" {
			t.Errorf("%s (%s) is still in the seed", k, phase)
		}
	}
	if n.etcd["pod/openshift-dns/dns-default-4hj2x"] != "Running" {
		t.Error("the seal deleted a running pod")
	}
	if len(n.deployments) != 1 || !n.deployments[0].booted {
		t.Errorf("ostree deployments left: %+v, want the booted one alone", n.deployments)
	}
}

// checkPlanRan: every command the plan shows ran, in the plan's order.
func checkPlanRan(t *testing.T, n *sealNode, plan []steps.Step) {
	t.Helper()
	cmds, at := n.commands(), 0
	for _, st := range plan {
		if len(st.Argv) == 0 || st.Name == "recert-etcd-stop" {
			continue
		}
		want := strings.Join(st.Argv, " ")
		if st.Name == "recert" { // its config path and mounts are the plan's; compare the head
			want = strings.Join(st.Argv[:8], " ")
		}
		i := slices.IndexFunc(cmds[at:], func(c []string) bool { return strings.HasPrefix(strings.Join(c, " "), want) })
		if i < 0 {
			t.Fatalf("step %s: %q did not run after command %d:\n%q", st.Name, want, at, cmds)
		}
		at += i + 1
	}
}

// checkLCAOrder: lifecycle-agent's order (OPENSHIFT-SEED.md 1b.4-6, then 1c.6, then 1c.7):
// finished pods deleted, Succeeded then Failed; the pull secret is replaced through the API while the cluster runs; then kubelet is
// stopped and disabled first, containers stopped, sandboxes removed, CRI-O stopped; then
// recert; then the deployments but the booted one go (image-based install deploys one).
func checkLCAOrder(t *testing.T, n *sealNode) {
	t.Helper()
	oc := "oc --kubeconfig " + filepath.Join(n.root, LocalhostKubeConfig)
	order := []string{
		oc + " delete pods --all-namespaces --field-selector=status.phase==Succeeded",
		oc + " delete pods --all-namespaces --field-selector=status.phase==Failed",
		oc + " -n openshift-config set data secret/pull-secret",
		oc + " delete machineconfigs.machineconfiguration.openshift.io rendered-master-old",
		"systemctl stop kubelet.service", "systemctl disable kubelet.service", "systemctl is-active crio",
		"crictl ps -q", "crictl stop --timeout 5 ", "crictl pods -q", "crictl rmp -f " + n.pods[0], "crictl rmp -f " + n.pods[1], "systemctl stop crio.service",
		"podman run --detach --rm --replace --name snofactory-recert-etcd", "curl --silent --fail --max-time 5 http://localhost:2379/health",
		"podman run --rm --replace --name snofactory-recert", "podman stop snofactory-recert-etcd",
		"rpm-ostree status --json", "ostree admin undeploy 2", "ostree admin undeploy 0",
		"systemctl enable snofactory-reconfigure.service",
	}
	last := -1
	for _, o := range order {
		i := n.index(o)
		if i <= last {
			t.Errorf("%q ran at %d, want after %d:\n%q", o, i, last, n.commands())
		}
		last = i
	}
	cmds := n.commands()
	if i := n.index(oc + " delete machineconfigs"); i < 0 || slices.Contains(cmds[i], "rendered-master-new") || slices.Contains(cmds[i], "00-master") {
		t.Errorf("deleted %q: only the rendered config no pool uses may go", cmds[max(i, 0)])
	}
	stops := slices.DeleteFunc(slices.Clone(cmds), func(c []string) bool { return !strings.HasPrefix(strings.Join(c, " "), "crictl stop --timeout 5 ") })
	if len(stops) != len(n.containers) || n.stopsMax != lcaContainerStops {
		t.Errorf("%d of %d containers stopped, at most %d at once; lifecycle-agent stops %d at once", len(stops), len(n.containers), n.stopsMax, lcaContainerStops)
	}
	if slices.ContainsFunc(cmds, func(c []string) bool { return strings.Join(c, " ") == "systemctl disable crio.service" }) {
		t.Error("CRI-O was disabled: lifecycle-agent only stops it")
	}
}

// checkSeedInfo: the identity comes from the cluster's objects.
func checkSeedInfo(t *testing.T, n *sealNode) {
	t.Helper()
	info, err := seedinfo.Read(filepath.Join(n.root, seedinfo.File))
	if err != nil {
		t.Fatal(err)
	}
	if info.Hostname != "seed-node" || info.ClusterName != "seed" || info.BaseDomain != "factory.example" ||
		!slices.Equal(info.NodeIPs, []string{"192.168.127.10", "fd00:127::10"}) || info.InfraID != "seed-x7k2p" ||
		info.ClusterID != "11111111-2222-4333-8444-555555555555" || info.IngressCertificateCN != "ingress-operator@1700000000" ||
		info.OCPVersion != "4.20.3" || info.RecertImage != recertImageForTst ||
		!slices.Equal(info.ClusterNetworks, []string{"10.128.0.0/14"}) || !slices.Equal(info.ServiceNetworks, []string{"172.30.0.0/16"}) {
		t.Errorf("seed info = %+v", info)
	}
}

// checkSeedRecertConfig: the seed-time recert forced expiry, defragmented etcd, left a
// disposable hash and was given the placeholder exactly as the MCO wrote it.
func checkSeedRecertConfig(t *testing.T, n *sealNode) {
	t.Helper()
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
		PullSecret  string `json:"pull_secret"`
	}
	if err := json.Unmarshal(cfg, &rc); err != nil {
		t.Fatal(err)
	}
	if !rc.ForceExpire || !rc.Defrag || rc.Extend || rc.Summary != RecertSeedSummary || rc.PullSecret != PlaceholderPullSecret+"\n" {
		t.Errorf("recert config %s", cfg)
	}
	if _, err := bcrypt.Cost([]byte(rc.Hash)); err != nil || rc.Hash == factoryAdminHash {
		t.Errorf("kubeadmin hash %q is not a fresh bcrypt hash: %v", rc.Hash, err)
	}
	if fi, err := os.Stat(filepath.Join(n.root, SealWorkDir, "recert_config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("recert config mode: %v %v", fi.Mode(), err)
	}
}

// checkSealedFiles: lifecycle-agent's exclusions are gone, what a MachineConfig owns and
// what the site's recert needs stay.
func checkSealedFiles(t *testing.T, n *sealNode) {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(n.root, ReconfigureUnitPath))
	if err != nil || !bytes.Contains(unit, []byte("ExecStart="+AgentPath+" agent reconfigure")) {
		t.Errorf("reconfigure unit: %s %v", unit, err)
	}
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(n.root, p)); return err == nil }
	for _, gone := range []string{"var/lib/ovn-ic/etc/ovnkube-node-certs", "etc/cni/multus/certs/multus-client-current.pem",
		"etc/cni/multus/net.d/multus.d/multus.kubeconfig", "etc/cni/multus/net.d/00-multus.conf",
		"var/log/journal", "var/lib/log/x", "var/lib/cni/bin/ovn-k8s-cni-overlay", "var/roothome/.bash_history", "var/home/core/.bash_history",
		"etc/NetworkManager/system-connections/br-ex.nmconnection", "etc/NetworkManager/system-connections/ovs-if-phys0.nmconnection",
		"etc/openvswitch/conf.db", "etc/openvswitch/.conf.db.~lock~", "etc/hostname", "etc/machine-config-daemon/orig/var/lib/kubelet",
		deployment{osname: "rhcos", checksum: checksum("bootimage")}.dir(), deployment{osname: "rhcos", checksum: checksum("pending")}.dir()} {
		if exists(gone) {
			t.Errorf("%s survived the seal", gone)
		}
	}
	for _, kept := range []string{"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", ownedNMProfile[1:], ownedMultusFile[1:], kubeletAuthFile[1:],
		"var/lib/containers/storage/overlay/l1/diff/root/.bash_history", "var/log", "etc/NetworkManager/system-connections",
		deployment{osname: "rhcos", checksum: checksum("booted")}.dir() + "/etc/hostname"} {
		if !exists(kept) {
			t.Errorf("%s is gone", kept)
		}
	}
}

// checkMCDSeesNoDrift checks every file of the node's currentconfig on disk as the MCD does
// (machine-config-operator pkg/daemon/on_disk_validation.go checkV3Files,
// checkFileContentsAndMode: the decoded contents byte for byte, and the mode).
func checkMCDSeesNoDrift(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, MCDCurrentConfig))
	if err != nil {
		t.Fatal(err)
	}
	var mc struct {
		Spec struct {
			Config struct {
				Storage struct {
					Files []struct {
						Path     string `json:"path"`
						Mode     int    `json:"mode"`
						Contents struct {
							Source string `json:"source"`
						} `json:"contents"`
					} `json:"files"`
				} `json:"storage"`
			} `json:"config"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &mc); err != nil {
		t.Fatal(err)
	}
	for _, f := range mc.Spec.Config.Storage.Files {
		want, err := url.PathUnescape(strings.TrimPrefix(f.Contents.Source, "data:,"))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(root, f.Path))
		if err != nil {
			t.Errorf("the MCD would degrade the pool: could not stat file %q: %v", f.Path, err)
			continue
		}
		got, _ := os.ReadFile(filepath.Join(root, f.Path))
		if string(got) != want || fi.Mode().Perm() != os.FileMode(f.Mode) {
			t.Errorf("the MCD would degrade the pool: content or mode mismatch for file %q (mode %v, want %v)", f.Path, fi.Mode().Perm(), os.FileMode(f.Mode))
		}
	}
}

// scanForSecrets: neither the build's pull secret nor the factory's kubeadmin hash is
// anywhere in the tree, the etcd stand-in, the node's /etc and ostree's deployments
// included. The token is base64, so it reads the same in a percent-escaped data URL.
func scanForSecrets(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		for _, secret := range []string{buildSecretToken, factoryAdminHash, base64.StdEncoding.EncodeToString([]byte(buildPullSecret))} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s still holds %.12s…", p, secret)
			}
		}
		return nil
	})
}

// The scan can fail: before the seal the tree holds both secrets, in etcd, in the
// machine-config server's first config and in the first boot's deployment.
func TestSealSecretScanCanFail(t *testing.T) {
	n := newSealNode(t)
	for _, p := range []string{"var/lib/etcd/member/snap/db", "etc/mcs-machine-config-content.json",
		n.deployments[2].dir() + "/etc/mcs-machine-config-content.json", MCDCurrentConfig[1:], kubeletAuthFile[1:]} {
		b, err := os.ReadFile(filepath.Join(n.root, p))
		if err != nil || !bytes.Contains(b, []byte(buildSecretToken)) {
			t.Errorf("the stand-in's %s does not hold the build's pull secret: %v", p, err)
		}
	}
	etcd, _ := os.ReadFile(n.etcdFile())
	if !bytes.Contains(etcd, []byte(factoryAdminHash)) {
		t.Fatal("the stand-in etcd does not hold the kubeadmin hash the scan looks for")
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
	want := []string{"relocation-config", "api", "read-cluster", "read-node", "seed-identity", "pods-succeeded", "pods-failed", "pull-secret-placeholder",
		"pull-secret-rollout", "old-rendered-configs", "kubelet-stop", "kubelet-disable", "crio-active", "containers-stop",
		"sandboxes-remove", "crio-stop", "recert-etcd", "recert", "recert-etcd-stop", "rollback-deployment", "per-node-state",
		"shell-history", "factory-etc", "machine-id", "ssh-host-keys", "pull-secret", "reconfigure-images", "reconfigure-unit",
		"reconfigure-enable", "sealed"}
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
