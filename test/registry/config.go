package registry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// config is what goes into the registry's config.yml.
type config struct {
	Addr     string
	Storage  string
	Htpasswd string // empty: no auth
	Cert     string // empty: plain HTTP
	Key      string
}

// render writes distribution 2.8's config format. Values are quoted with
// strconv.Quote, which YAML reads as double-quoted scalars.
func (c config) render() []byte {
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "version: 0.1\n")
	fmt.Fprintf(&b, "log:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: false\n")
	fmt.Fprintf(&b, "storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n", q(c.Storage))
	// Upload purging runs in the background and only matters for
	// long-lived registries.
	fmt.Fprintf(&b, "  maintenance:\n    uploadpurging:\n      enabled: false\n")
	fmt.Fprintf(&b, "http:\n  addr: %s\n  secret: %s\n", q(c.Addr), q(hex.EncodeToString(secret)))
	if c.Cert != "" {
		fmt.Fprintf(&b, "  tls:\n    certificate: %s\n    key: %s\n", q(c.Cert), q(c.Key))
	}
	if c.Htpasswd != "" {
		fmt.Fprintf(&b, "auth:\n  htpasswd:\n    realm: %s\n    path: %s\n", q("snofactory-test"), q(c.Htpasswd))
	}
	return []byte(b.String())
}

// writeHtpasswd writes one bcrypt entry, the only hash distribution accepts.
// The minimum cost keeps per-request verification cheap in tests.
func writeHtpasswd(path, user, pass string) error {
	if strings.ContainsAny(user, ":\n") {
		return fmt.Errorf("registry: username %q may not contain ':' or newline", user)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("registry: hash password: %w", err)
	}
	if err := os.WriteFile(path, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
		return fmt.Errorf("registry: write htpasswd: %w", err)
	}
	return nil
}

// writeSelfSigned makes a self-signed server certificate for the loopback
// addresses and writes it as certFile/keyFile, plus certDir/ca.crt for
// clients. It returns a pool trusting it.
func writeSelfSigned(certFile, keyFile, certDir string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("registry: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("registry: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "snofactory test registry", Organization: []string{"snofactory"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("registry: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("registry: marshal key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: cert dir: %w", err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{certFile, certPEM, 0o644},
		{keyFile, keyPEM, 0o600},
		{filepath.Join(certDir, "ca.crt"), certPEM, 0o644},
	} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("registry: write %s: %w", f.path, err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("registry: parse certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}
