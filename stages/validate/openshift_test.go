package validate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
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
	"github.com/snofactory/snofactory/seeds/agent/wire"
	"github.com/snofactory/snofactory/seeds/target"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// The OpenShift checks run against a real HTTPS API server: httptest serves the JSON
// files under testdata/api, written in the shapes OpenShift 4.16 returns them
// (ClusterVersion, ClusterOperatorList, NodeList, CertificateSigningRequestList,
// Infrastructure, MachineConfigPool, MachineConfigList, IngressController), to client-go
// as a real cluster would, over TLS with a certificate for the kubeconfig's host name and
// a bearer token. Certificates in CSRs are minted per test (placeholders {{CERT name}}).

// Certificates start an hour before the checks' clock; the clock is the real one (to the
// hour), since client-go verifies the API server's certificate against it.
var (
	testFrom = time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	testNow  = testFrom.Add(time.Hour)
)

func rfc(d time.Duration) string { return testFrom.Add(d).Format(time.RFC3339) }

const (
	testToken   = "sha256~test-token"
	testAPIHost = "api.sno.edge.example.com"
	year        = 365 * 24 * time.Hour
)

// relocationMCs are the names render gives its relocation MachineConfigs.
func relocationMCs() []string {
	return []string{"90-master-snofactory-internal-ip", "90-master-snofactory-node-ip", "90-master-snofactory-reconfigure", "90-master-snofactory-shipment"}
}

type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver-lb-signer", OrganizationalUnit: []string{"openshift"}},
		NotBefore: testFrom, NotAfter: testFrom.Add(10 * year), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for cn valid for life from testFrom.
func (ca *testCA) issue(t *testing.T, cn string, life time.Duration, dns ...string) (certPEM []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns,
		NotBefore: testFrom, NotAfter: testFrom.Add(life), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

// apiServer is one variant of the recorded cluster.
type apiServer struct {
	files map[string]string // API path -> testdata/api file
	// lifetimes of the certificates minted for the {{CERT name}} placeholders and the
	// API server's serving certificate ("api")
	lifetimes map[string]time.Duration
	// notReady counts down the /readyz answers that are 503 before it answers ok
	notReady *atomic.Int32
	// onNotReady, when set, hears each 503 served
	onNotReady func()
}

func healthyCluster() apiServer {
	return apiServer{
		files: map[string]string{
			"/apis/config.openshift.io/v1/clusterversions/version": "clusterversion.json",
			"/apis/config.openshift.io/v1/clusteroperators":        "clusteroperators.json",
			"/api/v1/nodes": "nodes.json",
			"/apis/certificates.k8s.io/v1/certificatesigningrequests":                                         "csrs.json",
			"/apis/config.openshift.io/v1/infrastructures/cluster":                                            "infrastructure.json",
			"/apis/machineconfiguration.openshift.io/v1/machineconfigpools/master":                            "mcp-master.json",
			"/apis/machineconfiguration.openshift.io/v1/machineconfigs":                                       "machineconfigs.json",
			"/apis/operator.openshift.io/v1/namespaces/openshift-ingress-operator/ingresscontrollers/default": "ingresscontroller-default.json",
		},
		lifetimes: map[string]time.Duration{"api": year, "kubelet-bootstrap": 24 * time.Hour, "kubelet-client": year, "kubelet-serving": year},
	}
}

// start serves the variant over TLS and returns a kubeconfig naming the API by its host
// name, and the server's URL to override it with (as the install stage's port forward).
func (a apiServer) start(t *testing.T) (kubeconfig, server string) {
	t.Helper()
	ca := newCA(t)
	certs := map[string]string{}
	for name, life := range a.lifetimes {
		if name == "api" {
			continue
		}
		p, _ := ca.issue(t, "system:node:sno", life)
		if name == "kubelet-bootstrap" {
			p, _ = ca.issue(t, "system:node:bootstrap", life)
		}
		certs[name] = base64.StdEncoding.EncodeToString(p)
	}
	srvPEM, srvKey := ca.issue(t, testAPIHost, a.lifetimes["api"], testAPIHost)
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	pair, err := tls.X509KeyPair(srvPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/readyz" {
			if a.notReady != nil && a.notReady.Add(-1) >= 0 {
				http.Error(w, "[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed", http.StatusServiceUnavailable)
				if a.onNotReady != nil {
					a.onNotReady()
				}
				return
			}
			fmt.Fprint(w, "ok")
			return
		}
		file, ok := a.files[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`)
			return
		}
		b, err := os.ReadFile(filepath.Join("testdata", "api", file))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body := string(b)
		for name, c := range certs {
			body = strings.ReplaceAll(body, "{{CERT "+name+"}}", c)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: https://%s:6443
  name: sno
contexts:
- context:
    cluster: sno
    user: admin
  name: admin
current-context: admin
users:
- name: admin
  user:
    token: %s
`, base64.StdEncoding.EncodeToString(ca.pem), testAPIHost, testToken)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, srv.URL
}

func (a apiServer) with(path, file string) apiServer {
	files := map[string]string{}
	for k, v := range a.files {
		files[k] = v
	}
	files[path] = file
	a.files = files
	return a
}

func (a apiServer) lifetime(name string, d time.Duration) apiServer {
	l := map[string]time.Duration{}
	for k, v := range a.lifetimes {
		l[k] = v
	}
	l[name] = d
	a.lifetimes = l
	return a
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

func TestOpenShiftChecks(t *testing.T) {
	healthy := healthyCluster()
	tests := []struct {
		name    string
		api     apiServer
		mutate  func(*Inputs)
		failing map[string]string // id -> piece of its message; every other OpenShift check passes
	}{
		{name: "healthy", api: healthy},
		{name: "degraded operator", api: healthy.with("/apis/config.openshift.io/v1/clusteroperators", "clusteroperators-degraded.json"),
			failing: map[string]string{CheckClusterOperators: "clusteroperator/kube-apiserver Degraded=True (NodeInstaller_InstallerPodFailed"}},
		{name: "pending csr", api: healthy.with("/apis/certificates.k8s.io/v1/certificatesigningrequests", "csrs-pending.json"),
			failing: map[string]string{CheckCSRNonePending: "CSR csr-m4hd9 pending (signer kubernetes.io/kubelet-serving"}},
		{name: "progressing clusterversion", api: healthy.with("/apis/config.openshift.io/v1/clusterversions/version", "clusterversion-progressing.json"),
			failing: map[string]string{CheckClusterVersion: "ClusterVersion Available=False"}},
		{name: "pool not updated", api: healthy.with("/apis/machineconfiguration.openshift.io/v1/machineconfigpools/master", "mcp-master-updating.json"),
			failing: map[string]string{CheckPoolUpdated: "machineconfigpool/master Updated=False"}},
		{name: "ingress not pinned", api: healthy.with("/apis/operator.openshift.io/v1/namespaces/openshift-ingress-operator/ingresscontrollers/default", "ingresscontroller-default-unpinned.json"),
			failing: map[string]string{CheckIngressPinned: "not pinned to the master pool"}},
		{name: "short kubelet client certificate", api: healthy.lifetime("kubelet-client", 24*time.Hour),
			failing: map[string]string{CheckKubeletClientCert: "the kubelet client certificate expires " + rfc(24*time.Hour) + ", 23h0m0s from now, inside the 720h0m0s shipment window"}},
		{name: "short kubelet serving certificate", api: healthy.lifetime("kubelet-serving", 10*24*time.Hour),
			failing: map[string]string{CheckKubeletServeCert: "the kubelet serving certificate expires"}},
		{name: "short api certificate", api: healthy.lifetime("api", 30*24*time.Hour),
			failing: map[string]string{CheckAPIServingCert: "the API serving certificate expires " + rfc(30*24*time.Hour)}},
		{name: "other locked version", api: healthy, mutate: func(in *Inputs) { in.OpenShift.Version = "4.16.13" },
			failing: map[string]string{CheckClusterVersion: "ClusterVersion is at 4.16.12, want the locked 4.16.13"}},
		{name: "relocation config missing", api: healthy, mutate: func(in *Inputs) {
			in.OpenShift.RelocationMachineConfigs = append(in.OpenShift.RelocationMachineConfigs, "90-master-snofactory-extra")
		}, failing: map[string]string{CheckRelocationConfigs: "MachineConfig 90-master-snofactory-extra missing"}},
		{name: "kubelet client certificate from facts", api: healthy, mutate: func(in *Inputs) {
			in.Facts = &wire.Facts{Certs: []wire.CertFact{{Name: wire.CertKubeletClient, Path: "/var/lib/kubelet/pki/kubelet-client-current.pem",
				Subject: "CN=system:node:sno", NotBefore: testFrom, NotAfter: testFrom.Add(30 * 24 * time.Hour)}}}
		}, failing: map[string]string{CheckKubeletClientCert: "expires " + rfc(30*24*time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kubeconfig, server := tt.api.start(t)
			in := Inputs{
				Options: Options{ShipmentWindow: 720 * time.Hour, Now: func() time.Time { return testNow }},
				OpenShift: &OpenShift{Kubeconfig: kubeconfig, Server: server, Version: "4.16.12",
					RelocationMachineConfigs: relocationMCs(), DayTwoWorkers: true},
			}
			if tt.mutate != nil {
				tt.mutate(&in)
			}
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
				if want, ok := tt.failing[id]; ok {
					if r.Status != StatusFail || !strings.Contains(r.Message, want) {
						t.Errorf("%s: %s %q, want fail with %q", id, r.Status, r.Message, want)
					}
					continue
				}
				if r.Status != StatusPass {
					t.Errorf("%s: %s %q %v, want pass", id, r.Status, r.Message, r.Evidence)
				}
			}
			// Only a failing check of severity error fails the gate: a short kubelet client
			// certificate is a warning (the site renews it).
			wantFailed := false
			for id := range tt.failing {
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
		})
	}
}

// Without day-2 workers the ingress check does not apply; a cluster that is not reachable
// is an error for every OpenShift check, which fails the gate.
func TestOpenShiftNotApplicableAndUnreachable(t *testing.T) {
	kubeconfig, server := healthyCluster().start(t)
	in := Inputs{Options: Options{Now: func() time.Time { return testNow }},
		OpenShift: &OpenShift{Kubeconfig: kubeconfig, Server: server, RelocationMachineConfigs: relocationMCs()}}
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
}

// WaitForAPI waits out a starting API server and names the last answer when it gives up.
func TestWaitForAPI(t *testing.T) {
	api := healthyCluster()
	api.notReady = &atomic.Int32{}
	api.notReady.Store(2)
	kubeconfig, server := api.start(t)
	o := &OpenShift{Kubeconfig: kubeconfig, Server: server}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitForAPI(ctx, o, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := api.notReady.Load(); n >= 0 {
		t.Errorf("ready before the server was (%d answers left)", n)
	}
	// Give up after the third 503 has been answered: an event, not a deadline a loaded
	// machine could miss before the first answer.
	api.notReady.Store(1 << 30)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var answered atomic.Int32
	kubeconfig, server = func() (string, string) {
		api.onNotReady = func() {
			if answered.Add(1) == 3 {
				cancel()
			}
		}
		return api.start(t)
	}()
	o = &OpenShift{Kubeconfig: kubeconfig, Server: server}
	err := WaitForAPI(ctx, o, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "503 Service Unavailable: [-]poststarthook") {
		t.Errorf("err = %v, want the last answer", err)
	}
}

func TestRESTConfigKeepsServerName(t *testing.T) {
	kubeconfig, _ := healthyCluster().start(t)
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
	rec := handoff.Render{Target: target.OpenShift, Kubeconfig: "kubeconfig", RelocationMachineConfigs: relocationMCs(),
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
