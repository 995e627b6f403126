package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// sealNode is a recording stand-in for an OpenShift node's commands (oc, systemctl,
// crictl, podman with etcd and recert, rpm-ostree and ostree). No OpenShift node runs here,
// so each part of the cluster the seal relies on acts as the upstream code it stands for,
// cited beside it, and where upstream's answer varies it gives the least convenient one.
// The cluster's etcd is a map saved to var/lib/etcd/member/snap/db, so the secret scan sees
// every value the kube-apiserver, the MCO and recert leave there.
type sealNode struct {
	t    *testing.T
	root string

	mu     sync.Mutex
	cmds   [][]string
	etcd   map[string]string // KIND/NAMESPACE/NAME or KIND/NAME → value
	polls  int               // MachineConfigPool reads after the placeholder went in
	set    bool              // the placeholder went in
	never  bool              // the MCO never rolls the placeholder out
	crioUp bool

	deployments []deployment // ostree's, in bootloader order

	containers          []string // what crictl ps -q lists
	pods                []string // what crictl pods -q lists
	stopsIn, stopsSeen  int      // crictl stops running now, and started in all
	stopsMax            int      // the most that ran at once
	stopGate            chan struct{}
	stopGateOpen        bool
	onStop              func() // called as each stop starts (nil: nothing)
	recertPullSecretSet bool
}

// deployment is one ostree deployment as rpm-ostree reports it.
type deployment struct {
	osname, checksum string
	serial           int
	booted, staged   bool
}

func (d deployment) dir() string {
	return path.Join("ostree/deploy", d.osname, "deploy", d.checksum+"."+strconv.Itoa(d.serial))
}

func checksum(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

func (n *sealNode) etcdFile() string { return filepath.Join(n.root, "var/lib/etcd/member/snap/db") }

// saveEtcd writes the etcd stand-in, one KEY=VALUE a line, sorted. Callers hold mu or run
// before the seal starts.
func (n *sealNode) saveEtcd() {
	keys := make([]string, 0, len(n.etcd))
	for k := range n.etcd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, n.etcd[k])
	}
	n.write("var/lib/etcd/member/snap/db", b.String(), 0o600)
}

func (n *sealNode) write(p, body string, mode os.FileMode) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(n.root, p)), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.root, p), []byte(body), mode); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(n.root, p), mode); err != nil {
		n.t.Fatal(err)
	}
}

// dataURL is a data URL as both the MCO and recert write one: "data:," and every byte but
// RFC 2396's unreserved ones percent-escaped (the MCO's templates go through fcct, whose
// base/v0_1/translate.go uses vincent-petithory/dataurl EscapeString; recert
// src/file_utils.rs dataurl_encode, dataurl_escape).
func dataURL(s string) string {
	var b strings.Builder
	b.WriteString("data:,")
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// ownedNMProfile is a NetworkManager profile a MachineConfig places: the seal's removal of
// the factory's profiles must leave it.
const ownedNMProfile = "/etc/NetworkManager/system-connections/mc-static.nmconnection"

// ownedMultusFile is a file under /etc/cni/multus that a MachineConfig places: the seal
// drops the rest of that directory, as lifecycle-agent's seed does, but never this.
const ownedMultusFile = "/etc/cni/multus/net.d/mc-owned.conf"

// renderedConfig is a rendered MachineConfig whose kubelet pull secret file holds
// secret+"\n": the MCO's templates/common/_base/files/pull-secret.yaml puts
// `{{.PullSecret}}` in a YAML block that ends in a newline, mode 0600.
func renderedConfig(name, secret string) map[string]any {
	return map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"osImageURL": "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333",
			"config": map[string]any{"ignition": map[string]any{"version": "3.5.0"}, "storage": map[string]any{"files": []any{
				map[string]any{"path": "/etc/kubernetes/kubelet-ca.crt", "mode": 0o644, "overwrite": true, "contents": map[string]any{"source": dataURL("-----BEGIN CERTIFICATE-----\n")}},
				map[string]any{"path": ownedNMProfile, "mode": 0o600, "overwrite": true, "contents": map[string]any{"source": dataURL("[connection]\nid=mc-static\n")}},
				map[string]any{"path": ownedMultusFile, "mode": 0o644, "overwrite": true, "contents": map[string]any{"source": dataURL("{\"mc\":true}\n")}},
				map[string]any{"path": kubeletAuthFile, "mode": 0o600, "overwrite": true, "contents": map[string]any{"source": dataURL(secret + "\n")}},
			}}}}}
}

// currentConfigJSON is the MCD's currentconfig: the rendered config, compact
// (machine-config-operator pkg/daemon writes it with json.Marshal).
func currentConfigJSON(t *testing.T, name, secret string) string {
	b, err := json.Marshal(renderedConfig(name, secret))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mcsContentJSON is /etc/mcs-machine-config-content.json as Ignition wrote it at the first
// boot: the machine-config server's whole first config, indented by four spaces
// (machine-config-operator pkg/server/server.go appendInitialMachineConfig).
func mcsContentJSON(t *testing.T, secret string) string {
	b, err := json.MarshalIndent(renderedConfig("rendered-master-old", secret), "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newSealNode(t *testing.T) *sealNode {
	n := &sealNode{t: t, root: t.TempDir(), crioUp: true, stopGate: make(chan struct{})}
	// Bootloader order after an OS update that was not made the default: a pending
	// deployment first, the booted one, then the first boot's (the boot image the MCD
	// rebased from), whose /etc Ignition wrote.
	n.deployments = []deployment{{osname: "rhcos", checksum: checksum("pending")}, {osname: "rhcos", checksum: checksum("booted"), booted: true},
		{osname: "rhcos", checksum: checksum("bootimage")}}
	for i := range 25 { // crictl lists the newest first (cri-tools cmd/crictl/container.go, sorted by CreatedAt)
		n.containers = append(n.containers, checksum(fmt.Sprintf("container-%02d", 24-i)))
	}
	// Pod sandbox IDs are full 64-hex IDs too, newest first (cri-tools cmd/crictl/sandbox.go
	// getSandboxesList sorts by CreatedAt, descending).
	n.pods = []string{checksum("sandbox-1"), checksum("sandbox-0")}
	n.etcd = map[string]string{"secret/openshift-config/pull-secret": buildPullSecret, "secret/kube-system/kubeadmin": factoryAdminHash,
		"machineconfig/00-master": dataURL(buildPullSecret + "\n"), "machineconfig/rendered-master-old": dataURL(buildPullSecret + "\n"),
		// Pods by phase: the factory's finished installer and job pods, and a running one.
		"pod/openshift-kube-apiserver/installer-7-seed-node": "Succeeded", "pod/openshift-etcd/revision-pruner-3-seed-node": "Succeeded",
		"pod/openshift-operator-lifecycle-manager/collect-profiles-29020-x7k2p": "Failed", "pod/openshift-dns/dns-default-4hj2x": "Running"}
	n.saveEtcd()
	for p, body := range map[string]string{
		"etc/hostname": "localhost.localdomain\n", "etc/machine-id": "0123456789abcdef\n", "etc/ssh/ssh_host_ed25519_key": "k", "etc/ssh/ssh_host_ed25519_key.pub": "p",
		kubeletAuthFile[1:]:                   buildPullSecret + "\n",
		MCDCurrentConfig[1:]:                  currentConfigJSON(t, "rendered-master-old", buildPullSecret),
		"etc/mcs-machine-config-content.json": mcsContentJSON(t, buildPullSecret),
		n.deployments[2].dir() + "/etc/mcs-machine-config-content.json":    mcsContentJSON(t, buildPullSecret),
		n.deployments[1].dir() + "/etc/hostname":                           "booted",
		n.deployments[0].dir() + "/etc/hostname":                           "pending",
		"etc/kubernetes/kubelet-ca.crt":                                    "-----BEGIN CERTIFICATE-----\n",
		"etc/kubernetes/manifests/etcd-pod.yaml":                           "etcd",
		"var/lib/ovn-ic/etc/ovnkube-node-certs/ovnkube-client-current.pem": "c", "etc/cni/multus/certs/multus-client-current.pem": "c",
		// What multus's daemon wrote at the factory (lifecycle-agent's seed drops all of /etc/cni/multus).
		"etc/cni/multus/net.d/multus.d/multus.kubeconfig": "factory token", "etc/cni/multus/net.d/00-multus.conf": "{}",
		ownedMultusFile[1:]:                "{\"mc\":true}\n",
		"var/log/journal/x/system.journal": "j", "var/lib/log/x": "l", "var/lib/cni/bin/ovn-k8s-cni-overlay": "b",
		"etc/default/nodeip-configuration":                                "KUBELET_NODEIP_HINT=192.168.127.0\n",
		"etc/NetworkManager/system-connections/br-ex.nmconnection":        "[connection]\nid=br-ex\n",
		"etc/NetworkManager/system-connections/ovs-if-phys0.nmconnection": "[connection]\nid=ovs-if-phys0\n",
		ownedNMProfile[1:]:        "[connection]\nid=mc-static\n",
		"etc/openvswitch/conf.db": "ovsdb", "etc/openvswitch/.conf.db.~lock~": "",
		"etc/machine-config-daemon/orig/var/lib/kubelet/config.json.mcdorig": "orig",
		"var/roothome/.bash_history":                                         "oc get pods\n",
		"var/home/core/.bash_history":                                        "sudo -i\n",
		"var/lib/containers/storage/overlay/l1/diff/root/.bash_history":      "image content",
	} {
		mode := os.FileMode(0o644)
		if p == kubeletAuthFile[1:] || p == ownedNMProfile[1:] {
			mode = 0o600
		}
		n.write(p, body, mode)
	}
	// kubelet is enabled (the MCO's kubelet.service unit is WantedBy=multi-user.target).
	if err := os.MkdirAll(filepath.Join(n.root, "etc/systemd/system/multi-user.target.wants"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/systemd/system/kubelet.service", filepath.Join(n.root, "etc/systemd/system/multi-user.target.wants/kubelet.service")); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *sealNode) sealer() Sealer {
	return Sealer{Root: n.root, Run: n.run, Clock: clocktest.New(time.Unix(1_800_000_000, 0)),
		Request: wire.SealRequest{Version: 1, Target: "openshift", RecertImage: recertImageForTst, EtcdImage: etcdImageForTst,
			RequiredFiles: []string{"/etc/default/nodeip-configuration"}}}
}

// index is where the first command starting with prefix ran, -1 if none did.
func (n *sealNode) index(prefix string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.IndexFunc(n.cmds, func(c []string) bool { return strings.HasPrefix(strings.Join(c, " "), prefix) })
}

func (n *sealNode) commands() [][]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.cmds)
}

// run answers the seal's commands. crictl stop runs outside the lock: the seal stops
// containers side by side.
func (n *sealNode) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	if name == "crictl" && len(args) > 0 && args[0] == "stop" {
		n.mu.Lock()
		n.cmds = append(n.cmds, argv)
		n.mu.Unlock()
		return n.crictlStop(ctx, args[len(args)-1])
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cmds = append(n.cmds, argv)
	switch name {
	case "oc":
		out, err := n.oc(argv)
		if err != nil || !slices.Contains(argv, "json") {
			return out, err
		}
		return kubectlJSON(out)
	case "systemctl", "crictl":
		return n.systemctlCrictl(strings.Join(argv, " "))
	case "podman", "curl":
		return n.podman(argv)
	case "rpm-ostree", "ostree":
		return n.ostree(argv)
	}
	return nil, fmt.Errorf("%s: command not found", name)
}

// systemctlCrictl answers systemctl and crictl.
func (n *sealNode) systemctlCrictl(line string) ([]byte, error) {
	switch {
	case line == "systemctl is-active crio":
		// systemctl(1) is-active: prints the state, exits 3 when the unit is not active
		// (lifecycle-agent ops.go StopClusterServices reads exit 3 as "already down").
		if !n.crioUp {
			return []byte("inactive\n"), exitErr(3)
		}
		return []byte("active\n"), nil
	case line == "crictl ps -q":
		// cri-tools cmd/crictl/container.go ListContainers: full IDs, one a line, each
		// ending in a newline, running containers only, newest first.
		return []byte(strings.Join(n.containers, "\n") + "\n"), nil
	case line == "crictl pods -q":
		// cri-tools cmd/crictl/sandbox.go OutputPodSandboxes: with --quiet, each sandbox's
		// full ID (pod.GetId(), never truncated) on its own line, newest first.
		return []byte(strings.Join(n.pods, "\n") + "\n"), nil
	case line == "crictl rmp -f "+n.pods[1]:
		// cri-tools cmd/crictl/sandbox.go removePodCommand: CNI teardown can fail, reported
		// as "removing the pod sandbox %q: %w".
		return nil, fmt.Errorf("removing the pod sandbox %q: rpc error: code = Unknown desc = failed to destroy network for pod sandbox: %w", n.pods[1], exitErr(1))
	case strings.HasPrefix(line, "systemctl enable "), strings.HasPrefix(line, "systemctl disable "):
		return n.systemctlEnable(line)
	case strings.HasPrefix(line, "systemctl stop "):
		return nil, nil // systemctl stop prints nothing
	case strings.HasPrefix(line, "crictl rmp -f "):
		// cri-tools cmd/crictl/sandbox.go removePodCommand: a ready sandbox is stopped first
		// under -f (StopPodSandbox prints "Stopped sandbox ID"), then RemovePodSandbox
		// prints "Removed sandbox ID".
		id := strings.TrimPrefix(line, "crictl rmp -f ")
		if !slices.Contains(n.pods, id) {
			return nil, fmt.Errorf("getting sandbox status of pod %q: rpc error: code = NotFound: %w", id, exitErr(1))
		}
		return fmt.Appendf(nil, "Stopped sandbox %s\nRemoved sandbox %s\n", id, id), nil
	}
	return nil, fmt.Errorf("the stand-in does not know %q", line)
}

// systemctlEnable is systemctl enable/disable of a unit WantedBy=multi-user.target
// (systemd src/shared/install.c): the wants link is made or removed and reported on stderr,
// which the seal does not read.
func (n *sealNode) systemctlEnable(line string) ([]byte, error) {
	f := strings.Fields(line)
	link := filepath.Join(n.root, "etc/systemd/system/multi-user.target.wants", f[2])
	if f[1] == "disable" {
		return nil, os.Remove(link)
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, err
	}
	return nil, os.Symlink("/etc/systemd/system/"+f[2], link)
}

// lcaContainerStops is how many containers lifecycle-agent stops at once (lca-cli/ops/ops.go
// StopClusterServices: xargs --max-procs 10), the stand-in's own copy so that a change to
// the seal's constant shows.
const lcaContainerStops = 10

// crictlStop is cri-tools cmd/crictl/container.go StopContainer. The stops are held until
// as many run at once as lifecycle-agent runs (xargs --max-procs 10) or every container's
// stop started, so a seal that stops fewer at once never gets past them, and one that
// stops more shows it in stopsMax. The last container exited between ps and stop: crictl
// answers NotFound, which the seal takes as a warning, as upstream does.
func (n *sealNode) crictlStop(ctx context.Context, id string) ([]byte, error) {
	n.mu.Lock()
	n.stopsIn++
	n.stopsSeen++
	n.stopsMax = max(n.stopsMax, n.stopsIn)
	if !n.stopGateOpen && (n.stopsIn == lcaContainerStops || n.stopsSeen == len(n.containers)) {
		n.stopGateOpen = true
		close(n.stopGate)
	}
	onStop := n.onStop
	n.mu.Unlock()
	if onStop != nil {
		onStop()
	}
	defer func() {
		n.mu.Lock()
		n.stopsIn--
		n.mu.Unlock()
	}()
	select {
	case <-n.stopGate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if id == n.containers[len(n.containers)-1] {
		return nil, fmt.Errorf("rpc error: code = NotFound desc = could not find container %q", id)
	}
	return []byte(id + "\n"), nil
}

// kubectlJSON prints what the API answered as `oc get -o json` does: kubectl's JSONPrinter
// (k8s.io/cli-runtime pkg/printers/json.go PrintObj) writes the object through
// encoding/json's MarshalIndent with four spaces (an unstructured object's keys sorted, as
// a map's are) and a final newline; --ignore-not-found with nothing found prints nothing.
func kubectlJSON(compact []byte) ([]byte, error) {
	if len(compact) == 0 {
		return compact, nil
	}
	var obj any
	if err := json.Unmarshal(compact, &obj); err != nil {
		return nil, fmt.Errorf("the oc stand-in's own answer: %w", err)
	}
	out, err := json.MarshalIndent(obj, "", "    ")
	return append(out, '\n'), err
}

// oc answers the seal's API calls as the kube-apiserver and the MCO would; run prints the
// -o json answers as kubectl does (kubectlJSON).
func (n *sealNode) oc(argv []string) ([]byte, error) {
	line := strings.Join(argv, " ")
	switch {
	case strings.Contains(line, "--raw /readyz"):
		// k8s.io/apiserver pkg/server/healthz/healthz.go: "ok" once every check passes;
		// before that the connection is refused.
		if len(n.cmds) < 2 {
			return nil, errors.New("The connection to the server localhost:6443 was refused - did you specify the right host or port?")
		}
		return []byte("ok"), nil
	case strings.Contains(line, "clusterversion.config.openshift.io/version"):
		return clusterObjects(n.t), nil
	case strings.Contains(line, "get nodes"):
		return []byte(`{"kind":"List","items":[{"kind":"Node","metadata":{"name":"seed-node"},"status":{"addresses":[
			{"type":"InternalIP","address":"fd00:127::10"},{"type":"InternalIP","address":"192.168.127.10"},{"type":"Hostname","address":"seed-node"}]}}]}`), nil
	case strings.Contains(line, "secret/router-ca"):
		return routerCA(n.t), nil
	case strings.Contains(line, "set data secret/pull-secret"):
		b, err := os.ReadFile(strings.TrimPrefix(argv[len(argv)-1], "--from-file=.dockerconfigjson="))
		if err != nil {
			return nil, err
		}
		n.etcd["secret/openshift-config/pull-secret"] = string(b)
		n.saveEtcd()
		n.set = true
		return []byte("secret/pull-secret data updated\n"), nil
	case strings.Contains(line, "delete pods --all-namespaces --field-selector=status.phase=="):
		return n.deletePods(line[strings.LastIndex(line, "==")+2:]), nil
	case strings.Contains(line, "get machineconfigpools"):
		return n.pools(), nil
	case strings.Contains(line, "get machineconfigs"):
		var items []string
		for k := range n.etcd {
			if name, ok := strings.CutPrefix(k, "machineconfig/"); ok {
				items = append(items, fmt.Sprintf(`{"kind":"MachineConfig","metadata":{"name":%q}}`, name))
			}
		}
		sort.Strings(items)
		return []byte(`{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `],"metadata":{"resourceVersion":""}}`), nil
	case strings.Contains(line, "delete machineconfigs"):
		var out strings.Builder
		for _, name := range argv[slices.Index(argv, "machineconfigs.machineconfiguration.openshift.io")+1:] {
			delete(n.etcd, "machineconfig/"+name)
			fmt.Fprintf(&out, "machineconfig.machineconfiguration.openshift.io %q deleted\n", name)
		}
		n.saveEtcd()
		return []byte(out.String()), nil
	}
	return nil, fmt.Errorf("the stand-in does not know %q", line)
}

// pools is `oc get machineconfigpools -o json`. After the placeholder went in, the MCO
// rolls it out over two polls: the template controller re-renders 00-master from the secret
// (pkg/controller/template), the render controller makes a new rendered config and points
// the pool's spec at it (pkg/controller/render), and the MCD writes the kubelet's file and
// currentconfig (pkg/daemon update.go) while the pool reports the machine updating. It
// never touches /etc/mcs-machine-config-content.json, which only Ignition wrote. The
// worker pool of a single node has no machines: 0 of 0 is ready (openshift/api
// machineconfiguration/v1 MachineConfigPoolStatus, counts always present).
func (n *sealNode) pools() []byte {
	spec, status, ready := "rendered-master-old", "rendered-master-old", 1
	if n.set && !n.never {
		n.polls++
		spec, ready = "rendered-master-new", 0
		if n.polls == 1 {
			n.etcd["machineconfig/00-master"] = dataURL(PlaceholderPullSecret + "\n")
			n.etcd["machineconfig/rendered-master-new"] = dataURL(PlaceholderPullSecret + "\n")
			n.saveEtcd()
		}
		if n.polls >= 2 {
			if n.polls == 2 {
				n.write(kubeletAuthFile[1:], PlaceholderPullSecret+"\n", 0o600)
				n.write(MCDCurrentConfig[1:], currentConfigJSON(n.t, "rendered-master-new", PlaceholderPullSecret), 0o644)
			}
			status, ready = "rendered-master-new", 1
		}
	}
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"List","items":[
		{"kind":"MachineConfigPool","metadata":{"name":"master"},"spec":{"configuration":{"name":%q}},
		 "status":{"configuration":{"name":%q},"machineCount":1,"updatedMachineCount":%d,"readyMachineCount":%d,"unavailableMachineCount":%d,"degradedMachineCount":0}},
		{"kind":"MachineConfigPool","metadata":{"name":"worker"},"spec":{"configuration":{"name":"rendered-worker-1"}},
		 "status":{"configuration":{"name":"rendered-worker-1"},"machineCount":0,"updatedMachineCount":0,"readyMachineCount":0,"unavailableMachineCount":0,"degradedMachineCount":0}}]}`,
		spec, status, ready, ready, 1-ready)
}

// podman answers the etcd and recert containers and the etcd health check.
func (n *sealNode) podman(argv []string) ([]byte, error) {
	switch {
	case argv[0] == "curl":
		// etcd server/etcdserver/api/etcdhttp/health.go: 200 with this body once healthy
		// (lifecycle-agent ops.go waitForEtcd reads only the status).
		return []byte(`{"health":"true","reason":""}`), nil
	case slices.Contains(argv, "--env"):
		return n.recert(argv)
	case slices.Contains(argv, "--detach"):
		// podman run --detach prints the new container's full ID (lifecycle-agent ops.go
		// RunUnauthenticatedEtcdServer ignores it).
		return []byte(checksum("etcd-container") + "\n"), nil
	case len(argv) > 2 && argv[1] == "stop":
		return []byte(argv[2] + "\n"), nil // podman stop prints each name it stopped
	}
	return nil, fmt.Errorf("the stand-in does not know %q", argv)
}

// recertConfig is what the recert stand-in reads of RECERT_CONFIG (recert src/config.rs
// parse_from_config_file).
type recertConfig struct {
	Hash        *string  `json:"kubeadmin_password_hash"`
	PullSecret  *string  `json:"pull_secret"`
	Dirs        []string `json:"cluster_customization_dirs"`
	Files       []string `json:"cluster_customization_files"`
	SummaryFile string   `json:"summary_file_clean"`
}

// recert does what recert does with the customizations the seal gives it; the
// certificates it re-signs are not imitated (no certificate is read back here).
func (n *sealNode) recert(argv []string) ([]byte, error) {
	i := slices.IndexFunc(argv, func(a string) bool { return strings.HasPrefix(a, "RECERT_CONFIG=") })
	b, err := os.ReadFile(filepath.Join(n.root, strings.TrimPrefix(argv[i], "RECERT_CONFIG=")))
	if err != nil {
		return nil, fmt.Errorf("recert: %w", err)
	}
	var cfg recertConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("recert: %w", err)
	}
	if cfg.Hash != nil { // src/ocp_postprocess.rs set_kubeadmin_password_hash
		n.etcd["secret/kube-system/kubeadmin"] = *cfg.Hash
	}
	if cfg.PullSecret != nil {
		n.recertPullSecretSet = true
		if err := n.recertPullSecret(*cfg.PullSecret, cfg); err != nil {
			return nil, fmt.Errorf("recert: renaming pull_secret: %w", err)
		}
	}
	n.saveEtcd()
	// src/logging.rs generate_summary: the clean summary redacts keys and the pull secret.
	n.write(cfg.SummaryFile[1:], "cluster_crypto: {}\nrecert_config: {pull_secret: <redacted>}\n", 0o644)
	return nil, nil
}

// recertPullSecret is recert src/ocp_postprocess/pull_secret_rename.rs rename_all: in etcd
// the pull-secret Secret and every MachineConfig's kubelet file (etcd_rename.rs
// fix_pull_secret_secret, fix_machineconfigs); in each customization directory every
// **/currentconfig (filesystem_rename.rs fix_filesystem_currentconfig) and, in a directory
// named kubelet, every **/config.json whole (fix_filesystem_pull_secret); each
// customization file named mcs-machine-config-content.json (rename_utils.rs
// fix_filesystem_mcs_machine_config_content). Files are written compact (serde_json
// to_string), sources as recert's data URLs.
func (n *sealNode) recertPullSecret(ps string, cfg recertConfig) error {
	n.etcd["secret/openshift-config/pull-secret"] = ps
	for k := range n.etcd {
		if strings.HasPrefix(k, "machineconfig/") {
			n.etcd[k] = dataURL(ps)
		}
	}
	var mcFiles []string
	for _, d := range cfg.Dirs {
		err := filepath.WalkDir(filepath.Join(n.root, d), func(p string, e os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case e.Name() == "currentconfig":
				mcFiles = append(mcFiles, p)
			case e.Name() == "config.json" && path.Base(d) == "kubelet":
				return os.WriteFile(p, []byte(ps), 0o600)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, f := range cfg.Files {
		if path.Base(f) == "mcs-machine-config-content.json" {
			mcFiles = append(mcFiles, filepath.Join(n.root, f))
		}
	}
	for _, p := range mcFiles {
		if err := overrideKubeletAuth(p, ps); err != nil {
			return err
		}
	}
	return nil
}

// overrideKubeletAuth is recert's pull_secret_rename/utils.rs override_machineconfig_source
// on one MachineConfig file.
func overrideKubeletAuth(p, ps string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var mc map[string]any
	if err := json.Unmarshal(b, &mc); err != nil {
		return fmt.Errorf("parsing currentconfig: %w", err)
	}
	files, _ := mc["spec"].(map[string]any)["config"].(map[string]any)["storage"].(map[string]any)["files"].([]any)
	for _, f := range files {
		if f := f.(map[string]any); f["path"] == kubeletAuthFile {
			f["contents"].(map[string]any)["source"] = dataURL(ps)
		}
	}
	out, err := json.Marshal(mc)
	if err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o644)
}

// ostree answers `rpm-ostree status --json` (rpm-ostree src/app/rpmostree-builtin-status.cxx
// prints the daemon's deployment variants, src/daemon/rpmostreed-deployment-utils.cxx
// rpmostreed_deployment_generate_variant: id is OSNAME-CHECKSUM.SERIAL) and `ostree admin
// undeploy INDEX` (ostree src/ostree/ot-admin-builtin-undeploy.c ot_admin_builtin_undeploy:
// out of range and booted indexes refused, the deployment dropped from the bootloader
// list, then ostree_sysroot_cleanup deletes its directory).
func (n *sealNode) ostree(argv []string) ([]byte, error) {
	if line := strings.Join(argv, " "); line == "rpm-ostree status --json" {
		var ds []string
		for _, d := range n.deployments {
			ds = append(ds, fmt.Sprintf(`{"id":"%s-%s.%d","osname":%q,"serial":%d,"checksum":%q,"base-checksum":null,"version":"9.6.20251015-0",
				"timestamp":1760000000,"origin":"","container-image-reference":"ostree-unverified-registry:quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333",
				"booted":%t,"staged":%t,"pinned":false,"unlocked":"none","requested-packages":[],"requested-base-removals":[]}`,
				d.osname, d.checksum, d.serial, d.osname, d.serial, d.checksum, d.booted, d.staged))
		}
		return []byte(`{"deployments":[` + strings.Join(ds, ",") + `],"transaction":null,"cached-update":null,"update-driver":null}` + "\n"), nil
	}
	if len(argv) != 4 || argv[1] != "admin" || argv[2] != "undeploy" {
		return nil, fmt.Errorf("the stand-in does not know %q", argv)
	}
	i, err := strconv.Atoi(argv[3])
	switch {
	case err != nil || i < 0 || i >= len(n.deployments):
		return nil, fmt.Errorf("error: Out of range deployment index %s, expected < %d: %w", argv[3], len(n.deployments), exitErr(1))
	case n.deployments[i].booted:
		return nil, fmt.Errorf("error: Cannot undeploy currently booted deployment %d: %w", i, exitErr(1))
	}
	d := n.deployments[i]
	n.deployments = slices.Delete(n.deployments, i, i+1)
	if err := os.RemoveAll(filepath.Join(n.root, d.dir())); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "Deleted deployment %s.%d\n", d.checksum, d.serial), nil
}

// deletePods is `oc delete pods --all-namespaces --field-selector=status.phase==PHASE`:
// kubectl's delete (k8s.io/kubectl pkg/cmd/delete/delete.go DeleteResult) prints one
// `pod "NAME" deleted from NAMESPACE namespace` line per pod it deleted, in the API's
// order, and with none "No resources found" on stderr and exit 0 (nothing on stdout).
func (n *sealNode) deletePods(phase string) []byte {
	var keys []string
	for k, v := range n.etcd {
		if strings.HasPrefix(k, "pod/") && v == phase {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out strings.Builder
	for _, k := range keys {
		f := strings.SplitN(k, "/", 3)
		delete(n.etcd, k)
		fmt.Fprintf(&out, "pod %q deleted from %s namespace\n", f[2], f[1])
	}
	n.saveEtcd()
	return []byte(out.String())
}
