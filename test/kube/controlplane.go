package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/snofactory/snofactory/test/kubeapi"
)

// Token is the bearer token of the cluster's admin (group system:masters), which every
// component uses: the cluster lives for one test.
const Token = "snofactory-test-kube-admin"

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	caPEM, err := c.writePKI()
	if err != nil {
		return err
	}
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	etcdURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := c.add(startProc(c.Dir, "etcd", c.bins.etcd, nil, "--name", "default", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL, "--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL, "--initial-cluster", "default="+peerURL)); err != nil {
		return err
	}
	c.apiPort = ports[2]
	url := fmt.Sprintf("https://%s:%d", c.NodeIP, c.apiPort)
	// The node has no name the machine's DNS knows: the apiserver reaches the kubelet by its
	// InternalIP, and advertises the bridge address as the kubernetes Service's endpoint.
	if err := c.add(startProc(c.Dir, "kube-apiserver", c.bins.apiserver, nil,
		"--etcd-servers", etcdURL, "--bind-address", c.NodeIP, "--advertise-address", c.NodeIP,
		"--secure-port", fmt.Sprint(c.apiPort), "--kubelet-preferred-address-types", "InternalIP",
		"--tls-cert-file", c.path("serving.crt"), "--tls-private-key-file", c.path("serving.key"), "--client-ca-file", c.path("ca.crt"),
		"--token-auth-file", c.path("tokens.csv"), "--authorization-mode", "AlwaysAllow",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", c.path("sa.key"),
		"--service-account-signing-key-file", c.path("sa.key"), "--service-cluster-ip-range", serviceRange,
		"--cert-dir", c.path("apiserver-certs"), "--enable-priority-and-fairness=false")); err != nil {
		return err
	}
	if err := iptables(ctx, "-A", c.dnatRule(c.apiPort)); err != nil {
		return err
	}
	c.ruleAdded = true
	c.Config = &rest.Config{Host: url, BearerToken: Token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: 50, Burst: 100}
	c.Kubeconfig = c.path("kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeapi.KubeconfigFor(url, caPEM, Token)), 0o600); err != nil {
		return err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return err
	}
	if err := c.waitReadyz(ctx, url, caPEM); err != nil {
		return err
	}
	// No node-ipam: pods take addresses from the bridge's host-local range, not node CIDRs.
	if err := c.add(startProc(c.Dir, "kube-controller-manager", filepath.Join(c.bins.node, "kube-controller-manager"), nil,
		"--kubeconfig", c.Kubeconfig, "--controllers", "*,-nodeipam", "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(ports[3]),
		"--service-account-private-key-file", c.path("sa.key"), "--root-ca-file", c.path("ca.crt"),
		"--use-service-account-credentials=false")); err != nil {
		return err
	}
	return c.add(startProc(c.Dir, "kube-scheduler", filepath.Join(c.bins.node, "kube-scheduler"), nil,
		"--kubeconfig", c.Kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(ports[4])))
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// waitReadyz asks /readyz until it answers 200: before the server listens there is no
// event to watch. Each try is bounded, and the wait ends with ctx or the server's exit.
func (c *Cluster) waitReadyz(ctx context.Context, url string, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+Token)
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		if err := c.exitedServer(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (%s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

// exitedServer reports a server that has exited: the cluster cannot come up without it.
func (c *Cluster) exitedServer() error {
	for _, p := range c.procs {
		if p.exited() {
			return fmt.Errorf("%s exited", p.name)
		}
	}
	return nil
}

// writePKI writes a CA, the apiserver's serving certificate (for the node address, the
// kubernetes Service's address and its DNS names, as pods reach it), the service-account
// key and the token file.
func (c *Cluster) writePKI() ([]byte, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "snofactory-test-kube-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("making the test CA: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(c.NodeIP), net.ParseIP(ServiceIP)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("making the serving certificate: %w", err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":      caPEM,
		"serving.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"serving.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		"tokens.csv":  []byte(Token + ",admin,admin,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(c.path(name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

// freePorts reserves n distinct loopback ports, all held open until all are chosen.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
