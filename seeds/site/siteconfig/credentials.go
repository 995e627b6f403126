package siteconfig

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/snofactory/snofactory/seeds/site/credentials"
)

// SiteCredentials are what `site-config create` makes for one site, as the image-based
// installer's config-image target does before the node ever boots: the site's kubeadmin
// password (only its hash goes on the medium) and an admin kubeconfig that works once
// recert has kept the retained crypto (Spec.KubeconfigCrypto, on the medium).
type SiteCredentials struct {
	// KubeadminPassword is empty when the site config gave its own hash.
	KubeadminPassword string
	// Kubeconfig is nil when the site config keeps the seed's cluster name (the API's name
	// is then not known here).
	Kubeconfig []byte
}

// Signer names of the retained crypto: recert's use_key rules match certificates by these
// CNs (lifecycle-agent recert.go), and the admin kubeconfig trusts their certificates.
const (
	signerLB             = "kube-apiserver-lb-signer"
	signerLocalhost      = "kube-apiserver-localhost-signer"
	signerServiceNetwork = "kube-apiserver-service-network-signer"
	signerAdminClient    = "admin-kubeconfig-signer"
	// signerLife is the serving signers' life in OpenShift (10 years).
	signerLife = 10 * 365 * 24 * time.Hour
)

// MakeCredentials completes sc for its site: a generated kubeadmin password's hash unless
// sc gives one or kubeadmin is false (the site then has no kubeadmin user), and, when sc
// renames the cluster, retained signer keys and the admin kubeconfig that trusts them. r is
// the source of randomness (crypto/rand in use).
func MakeCredentials(sc *SiteConfig, r io.Reader, now time.Time, kubeadmin bool) (*SiteCredentials, error) {
	if r == nil {
		r = rand.Reader
	}
	creds := &SiteCredentials{}
	if sc.Spec.KubeadminPasswordHash == "" && kubeadmin {
		pw, err := kubeadminPassword(r)
		if err != nil {
			return nil, err
		}
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		if err != nil {
			return nil, fmt.Errorf("hashing the kubeadmin password: %w", err)
		}
		creds.KubeadminPassword, sc.Spec.KubeadminPasswordHash = pw, string(h)
	}
	if sc.Spec.ClusterName == "" || sc.Spec.BaseDomain == "" || sc.Spec.KubeconfigCrypto != nil {
		return creds, nil
	}
	var k KubeconfigCrypto
	var caBundle []byte
	for _, s := range []struct {
		cn  string
		key *string
	}{{signerLB, &k.LoadBalancerSignerKey}, {signerLocalhost, &k.LocalhostSignerKey}, {signerServiceNetwork, &k.ServiceNetworkSignerKey}} {
		certPEM, keyPEM, _, _, err := selfSigned(r, s.cn, now)
		if err != nil {
			return nil, err
		}
		*s.key = string(keyPEM)
		caBundle = append(caBundle, certPEM...)
	}
	adminCAPEM, _, adminCA, adminKey, err := selfSigned(r, signerAdminClient, now)
	if err != nil {
		return nil, err
	}
	k.AdminClientCACert = string(adminCAPEM)
	clientCert, clientKey, err := adminClient(r, adminCA, adminKey, now)
	if err != nil {
		return nil, err
	}
	sc.Spec.KubeconfigCrypto = &k
	server := fmt.Sprintf("https://api.%s.%s:6443", sc.Spec.ClusterName, sc.Spec.BaseDomain)
	creds.Kubeconfig = fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: %s
contexts:
- context:
    cluster: %[3]s
    user: admin
  name: admin
current-context: admin
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
`, base64.StdEncoding.EncodeToString(caBundle), server, sc.Spec.ClusterName,
		base64.StdEncoding.EncodeToString(clientCert), base64.StdEncoding.EncodeToString(clientKey))
	return creds, nil
}

// kubeadminPassword is the installer's format: 23 characters, four groups of five from
// an unambiguous alphabet, joined by '-'.
func kubeadminPassword(r io.Reader) (string, error) {
	const alphabet = "23456789abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ"
	b := make([]byte, 20)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("making the kubeadmin password: %w", err)
	}
	out := make([]byte, 0, 23)
	for i, c := range b {
		if i > 0 && i%5 == 0 {
			out = append(out, '-')
		}
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out), nil
}

// selfSigned makes a 10-year CA certificate with its RSA key, as OpenShift's signers are.
func selfSigned(r io.Reader, cn string, now time.Time) (certPEM, keyPEM []byte, cert *x509.Certificate, key *rsa.PrivateKey, err error) {
	key, err = rsa.GenerateKey(r, 2048)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("making the %s key: %w", cn, err)
	}
	serial, err := rand.Int(r, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, OrganizationalUnit: []string{"openshift"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(signerLife), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	der, err := x509.CreateCertificate(r, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("making the %s certificate: %w", cn, err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), cert, key, nil
}

// adminClient is the admin kubeconfig's client certificate (system:admin in
// system:masters), signed by the retained admin client CA.
func adminClient(r io.Reader, ca *x509.Certificate, caKey *rsa.PrivateKey, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := rsa.GenerateKey(r, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("making the admin key: %w", err)
	}
	serial, err := rand.Int(r, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(signerLife), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(r, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("making the admin certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// ErrNoCredentialsRecipient: a generated password nobody can read is no use.
var ErrNoCredentialsRecipient = errors.New("the site's kubeadmin password and admin kubeconfig are made here, and only its credentials recipients can read them")

// Files are the credentials as a bundle's files: the password, and the admin kubeconfig.
func (c *SiteCredentials) Files() []credentials.File {
	var files []credentials.File
	if c.KubeadminPassword != "" {
		files = append(files, credentials.File{Name: "kubeadmin-password", Data: []byte(c.KubeadminPassword)})
	}
	if c.Kubeconfig != nil {
		files = append(files, credentials.File{Name: "kubeconfig", Data: c.Kubeconfig})
	}
	return files
}

// CredentialsHelp explains `site-config create`'s credentials flags.
const CredentialsHelp = `For an OpenShift site, --credentials-recipient (age or SSH public keys, repeatable) makes the
site's own credentials before the node ever boots, as the image-based installer does: a
kubeadmin password, whose bcrypt hash alone goes on the medium, and, when the site config
renames the cluster, signer keys recert keeps and an admin kubeconfig that works with them.
Password and kubeconfig are written only to --credentials-out (default OUTPUT.credentials.age,
0600), age-encrypted to the recipients. A site config that renames the cluster without a
kubeadminPasswordHash needs recipients, or --no-kubeadmin (the site then has no kubeadmin user).`

// RecipientHelp describes --credentials-recipient.
const RecipientHelp = "seal the site's kubeadmin password and admin kubeconfig to this age or SSH public key (repeatable)"
