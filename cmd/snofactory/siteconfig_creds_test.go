package main

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/site/credentials"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// site-config create makes a site's own credentials, as the image-based installer does:
// only the password's hash and the keys recert keeps go on the medium; the password and an
// admin kubeconfig that trusts those keys open only with the site's age identity.
func TestSiteConfigCreateCredentials(t *testing.T) {
	site := "../../seeds/site/siteconfig/testdata/site.yaml"
	dir := t.TempDir()
	iso := filepath.Join(dir, "site.iso")
	if code, _, errOut := runMain(t, "site-config", "create", site, "-o", iso); code != 2 || !strings.Contains(errOut, "--credentials-recipient") {
		t.Fatalf("a renamed cluster without recipients: exit %d, %s", code, errOut)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, "site-config", "create", site, "-o", iso, "--credentials-recipient", id.Recipient().String())
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	credsPath := iso + ".credentials.age"
	fi, err := os.Stat(credsPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	sc, err := siteconfig.ReadMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	k := sc.Spec.KubeconfigCrypto
	if sc.Spec.KubeadminPasswordHash == "" || k == nil {
		t.Fatalf("the medium lacks the hash or the retained crypto: %+v", sc.Spec)
	}
	f, _ := os.Open(credsPath)
	defer f.Close()
	files, err := credentials.Decrypt(f, id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, f := range files {
		got[f.Name] = f.Data
	}
	pw := got["kubeadmin-password"]
	if len(pw) != 23 || bcrypt.CompareHashAndPassword([]byte(sc.Spec.KubeadminPasswordHash), pw) != nil {
		t.Errorf("the password %q does not match the medium's hash", pw)
	}
	if medium, _ := os.ReadFile(iso); bytes.Contains(medium, pw) {
		t.Error("the medium holds the kubeadmin password in clear")
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				CA     string `yaml:"certificate-authority-data"`
				Server string `yaml:"server"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Cert string `yaml:"client-certificate-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(got["kubeconfig"], &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		t.Fatalf("kubeconfig %s: %v", got["kubeconfig"], err)
	}
	if kc.Clusters[0].Cluster.Server != "https://api.store-0042.edge.example.com:6443" {
		t.Errorf("server %s", kc.Clusters[0].Cluster.Server)
	}
	// The client certificate verifies against the admin CA recert will install whole.
	admin := parseCerts(t, []byte(k.AdminClientCACert))[0]
	client := parseCerts(t, b64(t, kc.Users[0].User.Cert))[0]
	if err := client.CheckSignatureFrom(admin); err != nil || client.Subject.CommonName != "system:admin" {
		t.Errorf("client certificate %s: %v", client.Subject, err)
	}
	// The CA data trusts the three signers whose keys recert keeps.
	cas := parseCerts(t, b64(t, kc.Clusters[0].Cluster.CA))
	keys := map[string]string{"kube-apiserver-lb-signer": k.LoadBalancerSignerKey, "kube-apiserver-localhost-signer": k.LocalhostSignerKey,
		"kube-apiserver-service-network-signer": k.ServiceNetworkSignerKey}
	if len(cas) != 3 {
		t.Fatalf("%d CA certificates, want 3", len(cas))
	}
	for _, ca := range cas {
		blk, _ := pem.Decode([]byte(keys[ca.Subject.CommonName]))
		if blk == nil {
			t.Fatalf("no retained key for %s", ca.Subject.CommonName)
		}
		key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(ca.PublicKey) {
			t.Errorf("%s: the kubeconfig trusts another key than the medium retains", ca.Subject.CommonName)
		}
	}
	// Another identity opens nothing.
	other, _ := age.GenerateX25519Identity()
	f2, _ := os.Open(credsPath)
	defer f2.Close()
	if _, err := credentials.Decrypt(f2, other); err == nil {
		t.Error("the credentials opened with another identity")
	}
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}
