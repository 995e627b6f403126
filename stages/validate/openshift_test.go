package validate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/clocktest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/test/kubeapi"
)

// The OpenShift checks run against a real kube-apiserver serving OpenShift's CRDs
// (test/kubeapi), laid out as a settled single-node cluster: ClusterVersion,
// ClusterOperators, the Node, Infrastructure, the master MachineConfigPool with render's
// relocation MachineConfigs, the default IngressController and the kubelet's CSRs. No
// operator runs there, so each case changes an object's status as its operator would.
// The kubelet's certificates in the CSRs are minted per case by a test CA.

// Certificates start an hour before the checks' clock; the clock is the real one (to the
// hour), since client-go verifies the API server's certificate against it.
var (
	testFrom = time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	testNow  = testFrom.Add(time.Hour)
)

func rfc(d time.Duration) string { return testFrom.Add(d).Format(time.RFC3339) }

const (
	testAPIHost   = "api.sno.edge.example.com"
	testVersion   = "4.20.3" // kubeapi.ClusterVersionStatus's
	year          = 365 * 24 * time.Hour
	csrUser       = "system:node:sno"
	bootstrapUser = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
)

// relocationMCs are the names render gives its relocation MachineConfigs.
func relocationMCs() []string {
	return []string{"50-master-dnsmasq-configuration", "90-master-snofactory-internal-ip", "90-master-snofactory-node-ip", "90-master-snofactory-seal", "90-master-snofactory-shipment"}
}

type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubelet-signer", OrganizationalUnit: []string{"openshift"}},
		NotBefore: testFrom, NotAfter: testFrom.Add(10 * year), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{key: key, cert: cert}
}

// issue signs a leaf for cn valid for life from start, and returns it with its key.
func (ca *testCA) issue(t *testing.T, cn string, start time.Time, life time.Duration) (certPEM []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore: start, NotAfter: start.Add(life), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

// issueCSR files and issues a kubelet CSR whose certificate ca signs for cn.
func (ca *testCA) issueCSR(t *testing.T, s *kubeapi.Server, name, signer, user, cn string, start time.Time, life time.Duration) {
	t.Helper()
	cert, key := ca.issue(t, cn, start, life)
	s.IssueCSR(t, name, signer, user, key, pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, cert)
}

// poolStatus is the master pool's status: rendered from sources, updated as given.
func poolStatus(updated string, sources []string) map[string]any {
	ts := testFrom.Format(time.RFC3339)
	src := []any{}
	for _, n := range sources {
		src = append(src, map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig", "name": n})
	}
	updating := "False"
	if updated != "True" {
		updating = "True"
	}
	machines := map[bool]int64{true: 1, false: 0}[updated == "True"]
	return map[string]any{"configuration": map[string]any{"name": "rendered-master-1", "source": src},
		"machineCount": 1, "updatedMachineCount": machines, "readyMachineCount": machines, "unavailableMachineCount": 1 - machines,
		"degradedMachineCount": 0, "observedGeneration": 1,
		"conditions": []any{
			map[string]any{"type": "Updated", "status": updated, "lastTransitionTime": ts},
			map[string]any{"type": "Updating", "status": updating, "lastTransitionTime": ts},
			map[string]any{"type": "Degraded", "status": "False", "lastTransitionTime": ts},
		}}
}

// ingressController is the default IngressController, pinned to the master pool or not.
func ingressController(pinned bool) string {
	placement := `"nodePlacement":{"nodeSelector":{"matchLabels":{"node-role.kubernetes.io/master":""}}},`
	if !pinned {
		placement = ""
	}
	return `{"apiVersion":"operator.openshift.io/v1","kind":"IngressController","metadata":{"name":"default","namespace":"openshift-ingress-operator"},
		"spec":{` + placement + `"replicas":1}}`
}

// seedChecked lays out, on top of kubeapi's settled cluster, what the build-time checks
// read beyond it: render's relocation MachineConfigs rendered into the master pool, the
// pinned IngressController, and the kubelet's CSRs (bootstrap, client and serving).
func seedChecked(t *testing.T, s *kubeapi.Server, ca *testCA) {
	t.Helper()
	s.SeedSNO(t, testFrom)
	sources := []string{"00-master", "01-master-kubelet"}
	for _, name := range relocationMCs() {
		s.Apply(t, kubeapi.MachineConfigs, fmt.Sprintf(`{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
			"metadata":{"name":%q,"labels":{"machineconfiguration.openshift.io/role":"master"}},"spec":{"config":{"ignition":{"version":"3.4.0"}}}}`, name))
		sources = append(sources, name)
	}
	s.SetStatus(t, kubeapi.MachineConfigPools, "master", poolStatus("True", sources))
	s.Apply(t, kubeapi.Namespaces, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"openshift-ingress-operator"}}`)
	s.Apply(t, kubeapi.IngressControllers, ingressController(true))
	ca.issueCSR(t, s, "csr-bootstrap", signerKubeletClient, bootstrapUser, "system:node:bootstrap", testFrom, 24*time.Hour)
	ca.issueCSR(t, s, "csr-client", signerKubeletClient, bootstrapUser, csrUser, testFrom, year)
	ca.issueCSR(t, s, "csr-serving", signerKubeletServing, csrUser, csrUser, testFrom, year)
}

// setEtcdEndpoints replaces openshift-etcd/etcd-endpoints' data, as cluster-etcd-operator
// would on its next sync.
func setEtcdEndpoints(t *testing.T, s *kubeapi.Server, data map[string]string) {
	t.Helper()
	s.Delete(t, kubeapi.ConfigMaps, "openshift-etcd", "etcd-endpoints")
	s.Apply(t, kubeapi.ConfigMaps, kubeapi.EtcdEndpoints(data))
}

// checkInputs are the validate inputs for s: the kubeconfig names the API by its host name
// and the server is reached through its loopback URL, as through the install stage's port
// forward.
func checkInputs(t *testing.T, s *kubeapi.Server) Inputs {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kubeapi.Kubeconfig("https://"+testAPIHost+":6443", s.CAPEM)), 0o600); err != nil {
		t.Fatal(err)
	}
	return Inputs{
		Options: Options{ShipmentWindow: 720 * time.Hour, Clock: clocktest.New(testNow)},
		OpenShift: &OpenShift{Kubeconfig: kubeconfig, Server: s.URL, Version: testVersion,
			RelocationMachineConfigs: relocationMCs(), DayTwoWorkers: true},
	}
}

func openshiftIDs() []string {
	var out []string
	for _, c := range KnownChecks() {
		if c.Scope == ScopeOpenShift {
			out = append(out, c.ID)
		}
	}
	return out
}

// evaluateOpenShift runs the checks and compares every OpenShift result: the failing
// ones with the message pieces given, every other one passing. Only a failing check of
// severity error fails the gate.
func evaluateOpenShift(t *testing.T, in Inputs, failing map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Evaluate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Result{}
	for _, r := range rep.Results {
		byID[r.ID] = r
	}
	for _, id := range openshiftIDs() {
		r := byID[id]
		if want, ok := failing[id]; ok {
			if r.Status != StatusFail || !strings.Contains(r.Message, want) {
				t.Errorf("%s: %s %q, want fail with %q", id, r.Status, r.Message, want)
			}
			continue
		}
		if r.Status != StatusPass {
			t.Errorf("%s: %s %q %v, want pass", id, r.Status, r.Message, r.Evidence)
		}
	}
	wantFailed := false
	for id := range failing {
		wantFailed = wantFailed || byID[id].Severity == SeverityError
	}
	for _, r := range rep.Results {
		// facts without host data fail host checks; those are not this test's subject
		wantFailed = wantFailed || (r.Scope == ScopeHost && r.Blocking())
	}
	if rep.Failed() != wantFailed {
		t.Errorf("Failed() = %v with %v, want %v", rep.Failed(), rep.FailureLines(), wantFailed)
	}
	if r := byID[CheckKubeletClientCert]; r.Status == StatusFail && !strings.Contains(r.Message, "renews it") {
		t.Errorf("a short kubelet client certificate does not say the site renews it: %q", r.Message)
	}
}

// Each case breaks one thing the way the cluster would show it, checks that exactly that
// check fails with a message naming the object, and heals it again.
func TestOpenShiftChecks(t *testing.T) {
	s := kubeapi.Start(t, kubeapi.Options{Hosts: []string{testAPIHost}})
	ca := newCA(t)
	seedChecked(t, s, ca)
	nothing := func(*testing.T) {}
	settled := kubeapi.OperatorStatus("True", "False", "False", testFrom)
	mcpSources := func() []string { return append([]string{"00-master", "01-master-kubelet"}, relocationMCs()...) }
	tests := []struct {
		name    string
		break_  func(t *testing.T)
		heal    func(t *testing.T)
		mutate  func(*Inputs)
		failing map[string]string // id -> piece of its message; every other OpenShift check passes
	}{
		{name: "healthy", break_: nothing, heal: nothing},
		{name: "degraded operator",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterOperators, "kube-apiserver", kubeapi.OperatorStatus("True", "False", "True", testFrom))
			},
			heal:    func(t *testing.T) { s.SetStatus(t, kubeapi.ClusterOperators, "kube-apiserver", settled) },
			failing: map[string]string{CheckClusterOperators: "clusteroperator/kube-apiserver Degraded=True (NodeInstaller_InstallerPodFailed"}},
		{name: "pending csr",
			break_: func(t *testing.T) {
				_, key := ca.issue(t, csrUser, testFrom, year)
				s.IssueCSR(t, "csr-m4hd9", signerKubeletServing, csrUser, key, pkix.Name{CommonName: csrUser, Organization: []string{"system:nodes"}}, nil)
			},
			heal:    func(t *testing.T) { s.Delete(t, kubeapi.CSRs, "", "csr-m4hd9") },
			failing: map[string]string{CheckCSRNonePending: "CSR csr-m4hd9 pending (signer kubernetes.io/kubelet-serving, requested by "}},
		{name: "clusterversion not available",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterVersions, "version", kubeapi.ClusterVersionStatus("False", testFrom))
			},
			heal: func(t *testing.T) {
				s.SetStatus(t, kubeapi.ClusterVersions, "version", kubeapi.ClusterVersionStatus("True", testFrom))
			},
			failing: map[string]string{CheckClusterVersion: "ClusterVersion Available=False"}},
		{name: "pool not updated",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.MachineConfigPools, "master", poolStatus("False", mcpSources()))
			},
			heal: func(t *testing.T) {
				s.SetStatus(t, kubeapi.MachineConfigPools, "master", poolStatus("True", mcpSources()))
			},
			failing: map[string]string{CheckPoolUpdated: "machineconfigpool/master Updated=False"}},
		{name: "relocation config not rendered into the pool",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.MachineConfigPools, "master", poolStatus("True", mcpSources()[:len(mcpSources())-1]))
			},
			heal: func(t *testing.T) {
				s.SetStatus(t, kubeapi.MachineConfigPools, "master", poolStatus("True", mcpSources()))
			},
			failing: map[string]string{CheckRelocationConfigs: "MachineConfig 90-master-snofactory-shipment is not rendered into the master pool's rendered-master-1"}},
		// The bootstrap etcd took the factory's DHCP address, which bootstrap-in-place carried to
		// the disk; the Node runs on the relocation address.
		{name: "etcd member on the factory address",
			break_: func(t *testing.T) { setEtcdEndpoints(t, s, map[string]string{kubeapi.EtcdMemberID: "10.0.2.15"}) },
			heal:   func(t *testing.T) { setEtcdEndpoints(t, s, map[string]string{kubeapi.EtcdMemberID: kubeapi.NodeIP}) },
			failing: map[string]string{CheckEtcdEndpoints: "etcd member 9c2f4e0d1a3b5768 is at 10.0.2.15 (openshift-etcd/etcd-endpoints), " +
				"but node sno's InternalIP is 192.168.127.10: the bootstrap etcd chose another address"}},
		{name: "node moved off the etcd member's address",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatusAt("True", "192.168.127.11"))
			},
			heal:    func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatus("True")) },
			failing: map[string]string{CheckEtcdEndpoints: "etcd member 9c2f4e0d1a3b5768 is at 192.168.127.10 (openshift-etcd/etcd-endpoints), but node sno's InternalIP is 192.168.127.11"}},
		{name: "node without an InternalIP",
			break_:  func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatusAt("True")) },
			heal:    func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatus("True")) },
			failing: map[string]string{CheckEtcdEndpoints: "node sno reports no InternalIP address"}},
		{name: "no etcd member listed",
			break_:  func(t *testing.T) { setEtcdEndpoints(t, s, nil) },
			heal:    func(t *testing.T) { setEtcdEndpoints(t, s, map[string]string{kubeapi.EtcdMemberID: kubeapi.NodeIP}) },
			failing: map[string]string{CheckEtcdEndpoints: "ConfigMap openshift-etcd/etcd-endpoints lists no etcd member"}},
		// A dual-stack node: the member is on the primary family's address.
		{name: "dual-stack node",
			break_: func(t *testing.T) {
				s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatusAt("True", kubeapi.NodeIP, "fd00:127::10"))
			},
			heal: func(t *testing.T) { s.SetStatus(t, kubeapi.Nodes, "sno", kubeapi.NodeStatus("True")) }},
		// While the member list cannot be read the operator writes node name to InternalIP.
		{name: "etcd endpoints from the node fallback",
			break_: func(t *testing.T) { setEtcdEndpoints(t, s, map[string]string{"sno": kubeapi.NodeIP}) },
			heal:   func(t *testing.T) { setEtcdEndpoints(t, s, map[string]string{kubeapi.EtcdMemberID: kubeapi.NodeIP}) }},
		{name: "ingress not pinned",
			break_: func(t *testing.T) {
				s.Delete(t, kubeapi.IngressControllers, "openshift-ingress-operator", "default")
				s.Apply(t, kubeapi.IngressControllers, ingressController(false))
			},
			heal: func(t *testing.T) {
				s.Delete(t, kubeapi.IngressControllers, "openshift-ingress-operator", "default")
				s.Apply(t, kubeapi.IngressControllers, ingressController(true))
			},
			failing: map[string]string{CheckIngressPinned: "not pinned to the master pool"}},
		{name: "short kubelet client certificate",
			// the newest certificate the signer issued to the node counts
			break_: func(t *testing.T) {
				ca.issueCSR(t, s, "csr-client-short", signerKubeletClient, csrUser, csrUser, testFrom.Add(time.Minute), 24*time.Hour)
			},
			heal: func(t *testing.T) { s.Delete(t, kubeapi.CSRs, "", "csr-client-short") },
			failing: map[string]string{CheckKubeletClientCert: "the kubelet client certificate expires " + rfc(24*time.Hour+time.Minute) +
				", 23h1m0s from now, inside the 720h0m0s shipment window"}},
		{name: "short kubelet serving certificate",
			break_: func(t *testing.T) {
				ca.issueCSR(t, s, "csr-serving-short", signerKubeletServing, csrUser, csrUser, testFrom.Add(time.Minute), 10*24*time.Hour)
			},
			heal:    func(t *testing.T) { s.Delete(t, kubeapi.CSRs, "", "csr-serving-short") },
			failing: map[string]string{CheckKubeletServeCert: "the kubelet serving certificate expires"}},
		{name: "other locked version", break_: nothing, heal: nothing, mutate: func(in *Inputs) { in.OpenShift.Version = "4.20.4" },
			failing: map[string]string{CheckClusterVersion: "ClusterVersion is at 4.20.3, want the locked 4.20.4"}},
		{name: "relocation config missing", break_: nothing, heal: nothing, mutate: func(in *Inputs) {
			in.OpenShift.RelocationMachineConfigs = append(in.OpenShift.RelocationMachineConfigs, "90-master-snofactory-extra")
		}, failing: map[string]string{CheckRelocationConfigs: "MachineConfig 90-master-snofactory-extra missing"}},
		{name: "kubelet client certificate from facts", break_: nothing, heal: nothing, mutate: func(in *Inputs) {
			in.Facts = &wire.Facts{Certs: []wire.CertFact{{Name: wire.CertKubeletClient, Path: "/var/lib/kubelet/pki/kubelet-client-current.pem",
				Subject: "CN=system:node:sno", NotBefore: testFrom, NotAfter: testFrom.Add(30 * 24 * time.Hour)}}}
		}, failing: map[string]string{CheckKubeletClientCert: "expires " + rfc(30*24*time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.break_(t)
			defer tt.heal(t)
			in := checkInputs(t, s)
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			evaluateOpenShift(t, in, tt.failing)
		})
	}

	// Without day-2 workers the ingress check does not apply; a cluster that is not
	// reachable is an error for every OpenShift check, which fails the gate.
	t.Run("not applicable and unreachable", func(t *testing.T) {
		in := checkInputs(t, s)
		in.OpenShift.DayTwoWorkers = false
		rep, err := Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if r.ID == CheckIngressPinned && (r.Status != StatusSkip || !strings.Contains(r.Message, "no day-2 workers")) {
				t.Errorf("ingress: %s %q, want skipped", r.Status, r.Message)
			}
		}
		in.OpenShift.Server = "https://127.0.0.1:1" // nothing listens there
		rep, err = Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if r.Scope == ScopeOpenShift && r.ID != CheckIngressPinned && r.Status != StatusError {
				t.Errorf("%s: %s, want error with the API unreachable", r.ID, r.Status)
			}
		}
		if !rep.Failed() {
			t.Error("an unreachable cluster passed the gate")
		}
	})
}

// The API server's own serving certificate is read through the TLS handshake: a server
// whose certificate ends inside the shipment window fails that check alone.
func TestOpenShiftShortAPICertificate(t *testing.T) {
	s := kubeapi.Start(t, kubeapi.Options{Hosts: []string{testAPIHost}, ServingLife: 29 * 24 * time.Hour})
	seedChecked(t, s, newCA(t))
	evaluateOpenShift(t, checkInputs(t, s), map[string]string{
		CheckAPIServingCert: "the API serving certificate expires " + s.ServingNotAfter.UTC().Format(time.RFC3339)})
}

// startingAPI stands in for an API server that is still starting, which a real one
// cannot be made to stay: /readyz answers 503 with the body kube-apiserver gives while
// notReady counts down (onNotReady hears each), then ok. It needs the bearer token.
func startingAPI(t *testing.T, notReady *atomic.Int32, onNotReady func()) *OpenShift {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+kubeapi.Token || r.URL.Path != "/readyz" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusUnauthorized)
			return
		}
		if notReady.Add(-1) >= 0 {
			http.Error(w, "[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed", http.StatusServiceUnavailable)
			if onNotReady != nil {
				onNotReady()
			}
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return &OpenShift{Kubeconfig: kubeconfigFor(t, srv)}
}

// WaitForAPI waits out a starting API server and names the last answer when it gives up.
func TestWaitForAPI(t *testing.T) {
	notReady := &atomic.Int32{}
	notReady.Store(2)
	o := startingAPI(t, notReady, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := WaitForAPI(ctx, o, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := notReady.Load(); n >= 0 {
		t.Errorf("ready before the server was (%d answers left)", n)
	}
	// Give up after the third 503 has been answered: an event, not a deadline a loaded
	// machine could miss before the first answer.
	never := &atomic.Int32{}
	never.Store(1 << 30)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var answered atomic.Int32
	o = startingAPI(t, never, func() {
		if answered.Add(1) == 3 {
			cancel()
		}
	})
	err := WaitForAPI(ctx, o, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: [-]poststarthook") {
		t.Errorf("err = %v, want the last answer", err)
	}
}

func TestRESTConfigKeepsServerName(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kubeapi.Kubeconfig("https://"+testAPIHost+":6443", nil)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(kubeconfig, "https://127.0.0.1:16443")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:16443" || cfg.TLSClientConfig.ServerName != testAPIHost {
		t.Errorf("host %s, server name %q", cfg.Host, cfg.TLSClientConfig.ServerName)
	}
}

// The stage takes the OpenShift inputs from upstream records: the kubeconfig and the
// relocation MachineConfigs from render, the locked version from resolve, day-2 workers
// from a worker config.
func TestOpenShiftInputsFromRecords(t *testing.T) {
	resolveDir, renderDir := t.TempDir(), t.TempDir()
	lock := &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion, Release: lockfile.LockedRelease{Version: "4.18.3"}}
	if err := lockfile.WriteLock(filepath.Join(resolveDir, lockfile.File), lock); err != nil {
		t.Fatal(err)
	}
	write := func(dir string, rec any) {
		if err := (&pipeline.Env{Out: dir}).WriteOutput(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(resolveDir, handoff.Resolve{Lock: lockfile.File})
	os.WriteFile(filepath.Join(renderDir, "kubeconfig"), []byte("apiVersion: v1\n"), 0o600)
	rec := handoff.Render{Target: oskind.OpenShift, Kubeconfig: "kubeconfig", RelocationMachineConfigs: relocationMCs(),
		Configs: map[string]handoff.IgnitionConfig{handoff.ConfigNode: {Path: "config.ign"}, handoff.ConfigWorker: {Path: "worker.ign"}}}
	write(renderDir, rec)
	env := &pipeline.Env{Inputs: map[string]string{handoff.StageResolve: resolveDir, handoff.StageRender: renderDir}}
	rd, err := handoff.Read[handoff.Render](env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := openshiftInputs(env, rd)
	if err != nil {
		t.Fatal(err)
	}
	want := &OpenShift{Kubeconfig: filepath.Join(renderDir, "kubeconfig"), Version: "4.18.3", RelocationMachineConfigs: relocationMCs(), DayTwoWorkers: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inputs = %+v, want %+v", got, want)
	}
	rec.Kubeconfig = ""
	write(renderDir, rec)
	rd, _ = handoff.Read[handoff.Render](env)
	if _, err := openshiftInputs(env, rd); err == nil || !strings.Contains(err.Error(), "no kubeconfig") {
		t.Errorf("err = %v, want no kubeconfig", err)
	}
}
