package validate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// Signers of the kubelet's certificates.
const (
	signerKubeletClient  = "kubernetes.io/kube-apiserver-client-kubelet"
	signerKubeletServing = "kubernetes.io/kubelet-serving"
)

// certInfo is the part of a certificate the lifetime checks need.
type certInfo struct {
	source              string
	subject             string
	notBefore, notAfter time.Time
}

// factsCerts are the kubelet certificates the guest reported, by name.
type factsCerts struct{ byName map[string]wire.CertFact }

func newFactsCerts(f *wire.Facts) *factsCerts {
	if f == nil {
		return nil
	}
	fc := &factsCerts{byName: map[string]wire.CertFact{}}
	for _, c := range f.Certs {
		fc.byName[c.Name] = c
	}
	return fc
}

// lifetime checks that cert stays valid for the shipment window from now.
func (c *cluster) lifetime(what string, cert certInfo) outcome {
	now := c.opts.Clock.Now()
	left := cert.notAfter.Sub(now)
	ev := []string{
		"from " + cert.source,
		"subject " + cert.subject,
		fmt.Sprintf("valid %s to %s (%s)", cert.notBefore.UTC().Format(time.RFC3339), cert.notAfter.UTC().Format(time.RFC3339), cert.notAfter.Sub(cert.notBefore).Round(time.Minute)),
	}
	if left < c.opts.ShipmentWindow {
		return fail(fmt.Sprintf("%s expires %s, %s from now, inside the %s shipment window",
			what, cert.notAfter.UTC().Format(time.RFC3339), left.Round(time.Minute), c.opts.ShipmentWindow), ev...)
	}
	return pass(fmt.Sprintf("%s valid %s more (window %s)", what, left.Round(time.Hour), c.opts.ShipmentWindow), ev...)
}

func (c *cluster) kubeletClientCert(ctx context.Context) outcome {
	o := c.kubeletCert(ctx, "the kubelet client certificate", wire.CertKubeletClient, signerKubeletClient)
	if o.status == StatusFail {
		o.message += "; the reconfiguration at the site renews it, so the seed must reach its site before it expires"
	}
	return o
}

func (c *cluster) kubeletServingCert(ctx context.Context) outcome {
	return c.kubeletCert(ctx, "the kubelet serving certificate", wire.CertKubeletServing, signerKubeletServing)
}

// kubeletCert checks the kubelet's certificate: the node's file as the facts describe it,
// else the newest certificate the signer issued to the node through a CSR.
func (c *cluster) kubeletCert(ctx context.Context, what, name, signer string) outcome {
	if c.facts != nil {
		if cf, ok := c.facts.byName[name]; ok {
			if cf.Error != "" {
				return errored(fmt.Errorf("%s on the node (%s): %s", what, cf.Path, cf.Error))
			}
			return c.lifetime(what, certInfo{source: "the node's " + cf.Path, subject: cf.Subject, notBefore: cf.NotBefore, notAfter: cf.NotAfter})
		}
	}
	n, err := c.node(ctx)
	if err != nil {
		return errored(err)
	}
	csrs, err := c.csrs(ctx)
	if err != nil {
		return errored(err)
	}
	var best *certInfo
	for _, csr := range csrs {
		if csr.Spec.SignerName != signer || len(csr.Status.Certificate) == 0 {
			continue
		}
		cert, err := parseCert(csr.Status.Certificate)
		if err != nil || cert.Subject.CommonName != "system:node:"+n.Name {
			continue
		}
		if best == nil || cert.NotBefore.After(best.notBefore) {
			best = &certInfo{source: "CSR " + csr.Name, subject: cert.Subject.String(), notBefore: cert.NotBefore, notAfter: cert.NotAfter}
		}
	}
	if best == nil {
		return errored(fmt.Errorf("%w: the guest reported no %s and no issued %s CSR for node %s remains", errNoEvidence, name, signer, n.Name))
	}
	return c.lifetime(what, *best)
}

func parseCert(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func (c *cluster) csrs(ctx context.Context) ([]certificatesv1.CertificateSigningRequest, error) {
	items, err := c.list(ctx, gvrCSR)
	if err != nil {
		return nil, err
	}
	out := make([]certificatesv1.CertificateSigningRequest, len(items))
	for i, it := range items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &out[i]); err != nil {
			return nil, fmt.Errorf("csr %s: %w", it.GetName(), err)
		}
	}
	return out, nil
}

func (c *cluster) csrNonePending(ctx context.Context) outcome {
	csrs, err := c.csrs(ctx)
	if err != nil {
		return errored(err)
	}
	var problems []string
	for _, csr := range csrs {
		decided := false
		for _, cond := range csr.Status.Conditions {
			switch cond.Type {
			case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
				decided = true
			}
		}
		if !decided {
			problems = append(problems, fmt.Sprintf("CSR %s pending (signer %s, requested by %s)", csr.Name, csr.Spec.SignerName, csr.Spec.Username))
		}
	}
	return failures(problems, fmt.Sprintf("no pending CSRs (%d in all)", len(csrs)))
}

// apiServingCert reads the API server's serving certificate through a TLS handshake with
// the API endpoint, verified as the client verifies it.
func (c *cluster) apiServingCert(ctx context.Context) outcome {
	cert, err := servingCert(ctx, c.cfg)
	if err != nil {
		return errored(err)
	}
	return c.lifetime("the API serving certificate", certInfo{source: "TLS handshake with " + c.cfg.Host,
		subject: cert.Subject.String(), notBefore: cert.NotBefore, notAfter: cert.NotAfter})
}

func servingCert(ctx context.Context, cfg *rest.Config) (*x509.Certificate, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API TLS configuration: %w", err)
	}
	if tlsCfg == nil {
		return nil, fmt.Errorf("API server %s is not reached over TLS", cfg.Host)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server %q: %w", cfg.Host, err)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	if tlsCfg.ServerName == "" {
		tlsCfg.ServerName = u.Hostname()
	}
	d := tls.Dialer{Config: tlsCfg, NetDialer: &net.Dialer{Timeout: requestTimeout}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with the API server %s: %w", strings.TrimPrefix(cfg.Host, "https://"), err)
	}
	defer conn.Close()
	peers := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(peers) == 0 {
		return nil, fmt.Errorf("API server %s sent no certificate", cfg.Host)
	}
	return peers[0], nil
}
