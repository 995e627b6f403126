// Package kubeapi starts a real Kubernetes API server for tests: Debian's etcd and a
// kube-apiserver built from k8s.io/kubernetes by build.sh (make deps), serving OpenShift's
// own CRDs (ClusterVersion, ClusterOperator, Infrastructure, MachineConfigPool,
// MachineConfig, IngressController from github.com/openshift/api). The cluster checks are
// tested against it instead of hand-written answers: what the server accepts, defaults and
// returns is the real thing. No OpenShift operator runs, so the tests set each object's
// status themselves, as the operators would.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Token is the bearer token of the server's admin user (group system:masters).
const Token = "snofactory-test-admin-token"

// Server is a running API server.
type Server struct {
	// URL is https://127.0.0.1:PORT; Kubeconfig a file that reaches it as the admin.
	URL, Kubeconfig string
	// CAPEM signs the serving certificate, which names Hosts as well as 127.0.0.1.
	CAPEM []byte
	// ServingNotAfter is when the serving certificate expires.
	ServingNotAfter time.Time
	Dynamic         dynamic.Interface
	Config          *rest.Config
}

// Options shape the server.
type Options struct {
	// Hosts are extra DNS names in the serving certificate (a kubeconfig may name the API
	// by them while reaching it through URL).
	Hosts []string
	// ServingLife is the serving certificate's validity (default a year).
	ServingLife time.Duration
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Binaries are the server's programs and CRDs: build/kube of the module, and etcd on PATH.
func Binaries() (apiserver, etcd, crds string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", "", err
	}
	apiserver, crds = filepath.Join(root, "build", "kube", "kube-apiserver"), filepath.Join(root, "build", "kube", "crds")
	var missing []string
	if _, err := os.Stat(apiserver); err != nil {
		missing = append(missing, apiserver)
	}
	if _, err := os.Stat(crds); err != nil {
		missing = append(missing, crds)
	}
	etcd, err = exec.LookPath("etcd")
	if err != nil {
		missing = append(missing, "etcd (Debian package etcd-server)")
	}
	if len(missing) > 0 {
		return "", "", "", fmt.Errorf("missing %s: run `make deps` (it builds kube-apiserver once and installs etcd-server)", strings.Join(missing, ", "))
	}
	return apiserver, etcd, crds, nil
}

// Start starts etcd and kube-apiserver on free loopback ports, loads the CRDs and returns
// once they are established. Both processes are stopped at the test's cleanup. Without
// the binaries the test fails (it is skipped under -short).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	apiserver, etcd, crds, err := Binaries()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if o.ServingLife == 0 {
		o.ServingLife = 365 * 24 * time.Hour
	}
	dir := t.TempDir()
	clientPort, peerPort, securePort := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	start(t, dir, "etcd", etcd, "--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "default="+peerURL)
	waitHTTP(t, "etcd", http.DefaultClient, etcdURL+"/health", "", 2*time.Minute)

	s := &Server{URL: fmt.Sprintf("https://127.0.0.1:%d", securePort)}
	caPEM, certFile, keyFile, notAfter := servingCert(t, dir, o)
	s.CAPEM, s.ServingNotAfter = caPEM, notAfter
	saKey := filepath.Join(dir, "sa.key")
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}))
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(Token+",admin,admin,system:masters\n"))
	start(t, dir, "kube-apiserver", apiserver, "--etcd-servers", etcdURL, "--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(securePort),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile, "--token-auth-file", tokens,
		"--authorization-mode", "AlwaysAllow", "--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/24", "--cert-dir", filepath.Join(dir, "certs"),
		"--enable-priority-and-fairness=false", "--disable-admission-plugins", "ServiceAccount")

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitHTTP(t, "kube-apiserver", client, s.URL+"/readyz", Token, 3*time.Minute)

	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(t, s.Kubeconfig, []byte(Kubeconfig(s.URL, caPEM)))
	s.Config = &rest.Config{Host: s.URL, BearerToken: Token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: 50, Burst: 100}
	if s.Dynamic, err = dynamic.NewForConfig(s.Config); err != nil {
		t.Fatal(err)
	}
	s.loadCRDs(t, crds)
	return s
}

// Kubeconfig is an admin kubeconfig for server.
func Kubeconfig(server string, caPEM []byte) string {
	return KubeconfigFor(server, caPEM, Token)
}

// KubeconfigFor is a kubeconfig for server, trusting caPEM, that presents token.
func KubeconfigFor(server string, caPEM []byte, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: test
contexts:
- context:
    cluster: test
    user: admin
  name: admin
current-context: admin
users:
- name: admin
  user:
    token: %s
`, base64.StdEncoding.EncodeToString(caPEM), server, token)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// loadCRDs creates every CRD in dir and waits until each is established.
func (s *Server) loadCRDs(t testing.TB, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v): run `make deps`", dir, err)
	}
	ctx := context.Background()
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		obj := s.decode(t, b)
		if _, err := s.Dynamic.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the CRD in %s: %v", filepath.Base(f), err)
		}
		names = append(names, obj.GetName())
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, n := range names {
		for {
			crd, err := s.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established: %v", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Discovery lags establishment a little: wait until every CRD's resource lists.
	for _, n := range names {
		crd, _ := s.Dynamic.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		v, _ := versions[0].(map[string]any)["name"].(string)
		gvr := schema.GroupVersionResource{Group: group, Version: v, Resource: plural}
		for {
			_, err := s.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not served: %v", gvr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (s *Server) decode(t testing.TB, b []byte) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding an object: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

// Apply creates the object (YAML or JSON), then sets its status through the status
// subresource when it has one, as the operator owning it would. It returns the stored object.
func (s *Server) Apply(t testing.TB, gvr schema.GroupVersionResource, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := s.decode(t, []byte(doc))
	status, hasStatus := obj.Object["status"]
	ctx := context.Background()
	var res dynamic.ResourceInterface = s.Dynamic.Resource(gvr)
	if ns := obj.GetNamespace(); ns != "" {
		res = s.Dynamic.Resource(gvr).Namespace(ns)
	}
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s: %v", gvr.Resource, obj.GetName(), err)
	}
	if !hasStatus {
		return created
	}
	created.Object["status"] = status
	updated, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting the status of %s %s: %v", gvr.Resource, obj.GetName(), err)
	}
	return updated
}

// SetStatus replaces an existing object's status, as its operator would.
func (s *Server) SetStatus(t testing.TB, gvr schema.GroupVersionResource, name string, status map[string]any) {
	t.Helper()
	ctx := context.Background()
	obj, err := s.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = status
	if _, err := s.Dynamic.Resource(gvr).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the status of %s %s: %v", gvr.Resource, name, err)
	}
}

// start runs a server process in its own process group, logging to dir, and stops it at
// cleanup; a process that exits early fails the test with its log's tail.
func start(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	go func() {
		<-done
		if t.Context().Err() == nil { // exited while the test still needed it
			t.Errorf("%s exited early:\n%s", name, tailOf(logPath))
		}
	}()
}

func tailOf(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP polls url until it answers 200; the bound is a ceiling for a loaded machine,
// not a measure.
func waitHTTP(t testing.TB, name string, c *http.Client, url, token string, ceiling time.Duration) {
	t.Helper()
	deadline := time.Now().Add(ceiling)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not become ready within %s: %s", name, ceiling, last)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// servingCert makes a CA and a serving certificate for 127.0.0.1, localhost and o.Hosts.
func servingCert(t testing.TB, dir string, o Options) (caPEM []byte, certFile, keyFile string, notAfter time.Time) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubeapi-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	notAfter = now.Add(o.ServingLife).Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter, DNSNames: append([]string{"localhost"}, o.Hosts...),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certFile, keyFile = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return caPEM, certFile, keyFile, notAfter
}
