package pubkey_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/trust/pubkey"
)

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemOf(t *testing.T, typ string, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestParse(t *testing.T) {
	ec := ecKey(t)
	good := pemOf(t, "PUBLIC KEY", &ec.PublicKey)
	der, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	sum := sha256.Sum256(der)
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string // "" for success, else a substring of the error
	}{
		{"ECDSA public key", good, ""},
		{"trailing space is fine", append(append([]byte{}, good...), "\n\n"...), ""},
		{"not PEM", []byte("ssh-ed25519 AAAA"), "k.pub: not a PEM public key"},
		{"private key block", pemOf(t, "EC PRIVATE KEY", &ec.PublicKey), `a PEM "EC PRIVATE KEY"`},
		{"two blocks", append(append([]byte{}, good...), good...), "more than one PEM block"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}), "k.pub: "},
		{"not ECDSA", pemOf(t, "PUBLIC KEY", edPub), "ed25519.PublicKey key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := pubkey.Parse("k.pub", tt.data)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ...%s...", err, tt.want)
				}
				if k.ECDSA() != nil || k.Fingerprint != "" {
					t.Errorf("failed Parse returned %+v", k)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Fingerprint != hex.EncodeToString(sum[:]) {
				t.Errorf("Fingerprint = %s, want the sha256 of the DER", k.Fingerprint)
			}
			if !k.ECDSA().Equal(&ec.PublicKey) {
				t.Error("ECDSA is not the parsed key")
			}
		})
	}
}

func TestFromECDSAAndPEMRoundTrip(t *testing.T) {
	ec := ecKey(t)
	k, err := pubkey.FromECDSA(&ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.PEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := pubkey.Parse("round trip", b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint != k.Fingerprint || !back.ECDSA().Equal(k.ECDSA()) {
		t.Errorf("PEM then Parse gave %s, want %s", back.Fingerprint, k.Fingerprint)
	}
	other, _ := pubkey.FromECDSA(&ecKey(t).PublicKey)
	if other.Fingerprint == k.Fingerprint {
		t.Error("two keys share a fingerprint")
	}
	if (pubkey.Key{}).ECDSA() != nil {
		t.Error("zero Key has a key")
	}
}
