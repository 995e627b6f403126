package trust_test

import (
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/test/testbin"
)

// blobPassphrase is the one keys() encrypts with.
const blobPassphrase = "correct horse"

func signer(t *testing.T, prefix string) *trust.Signer {
	t.Helper()
	s, err := trust.LoadSigner(trust.KeyFile(prefix), []byte(blobPassphrase), "snofactory test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func publicKey(t *testing.T, prefix string) trust.PublicKey {
	t.Helper()
	k, err := trust.LoadPublicKey(trust.PubFile(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// cosignCmd runs the cosign `make deps` built, offline: no TUF root, the key's passphrase
// from COSIGN_PASSWORD.
func cosignCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testbin.Cosign(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir(), "COSIGN_PASSWORD="+blobPassphrase)
	return cmd
}

// A blob signature verifies with the key that made it and names that key; every other
// signature is refused with the reason: none, garbled, by another key, or over other bytes.
func TestVerifyBlob(t *testing.T) {
	dir := t.TempDir()
	good, other := keys(t, dir, "site"), keys(t, dir, "other")
	data := []byte("apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\n")
	sig, err := signer(t, good).SignBlob(data)
	if err != nil {
		t.Fatal(err)
	}
	otherSig, err := signer(t, other).SignBlob(data)
	if err != nil {
		t.Fatal(err)
	}
	goodKey, otherKey := publicKey(t, good), publicKey(t, other)
	// openssl, not our code, computes the fingerprint: sha256 of the DER SubjectPublicKeyInfo.
	der, err := exec.Command("openssl", "pkey", "-pubin", "-in", trust.PubFile(good), "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	sum, err := sha256Hex(der)
	if err != nil {
		t.Fatal(err)
	}
	if goodKey.Fingerprint != sum {
		t.Errorf("fingerprint %s, openssl's DER hashes to %s", goodKey.Fingerprint, sum)
	}

	raw, _ := base64.StdEncoding.DecodeString(sig)
	flipped := append([]byte{}, raw...)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name string
		keys []trust.PublicKey
		data []byte
		sig  string
		want error // nil: verified by goodKey
	}{
		{"signed", []trust.PublicKey{otherKey, goodKey}, data, sig, nil},
		{"white space around", []trust.PublicKey{goodKey}, data, "\n " + sig + "\n", nil},
		{"unsigned", []trust.PublicKey{goodKey}, data, "", trust.ErrBlobUnsigned},
		{"blank", []trust.PublicKey{goodKey}, data, " \n", trust.ErrBlobUnsigned},
		{"not base64", []trust.PublicKey{goodKey}, data, "not base64!", trust.ErrBlobSignatureMalformed},
		{"not ASN.1", []trust.PublicKey{goodKey}, data, base64.StdEncoding.EncodeToString([]byte("garbage")), trust.ErrBlobSignatureMalformed},
		{"too long", []trust.PublicKey{goodKey}, data, strings.Repeat("A", 4096), trust.ErrBlobSignatureMalformed},
		{"another key", []trust.PublicKey{goodKey}, data, otherSig, trust.ErrBlobNoKey},
		{"content changed", []trust.PublicKey{goodKey}, append([]byte{}, append(data, ' ')...), sig, trust.ErrBlobNoKey},
		{"signature changed", []trust.PublicKey{goodKey}, data, base64.StdEncoding.EncodeToString(flipped), trust.ErrBlobNoKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, err := trust.VerifyBlob(tc.keys, tc.data, []byte(tc.sig))
			switch {
			case tc.want == nil && (err != nil || fp != goodKey.Fingerprint):
				t.Errorf("VerifyBlob = %q, %v; want %s", fp, err, goodKey.Fingerprint)
			case tc.want != nil && (!errors.Is(err, tc.want) || fp != ""):
				t.Errorf("VerifyBlob = %q, %v; want %v", fp, err, tc.want)
			}
		})
	}
	if _, err := trust.VerifyBlob(nil, data, []byte(sig)); err == nil {
		t.Error("VerifyBlob without keys accepted a signature")
	}
	if _, err := trust.VerifyBlob([]trust.PublicKey{goodKey}, data, []byte(otherSig)); err == nil || !strings.Contains(err.Error(), trust.ShortFingerprint(goodKey.Fingerprint)) {
		t.Errorf("a refusal does not name the keys it tried: %v", err)
	}
}

func sha256Hex(b []byte) (string, error) {
	cmd := exec.Command("sha256sum")
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.Fields(string(out))[0], nil
}

// Keys and PEM: only a PEM public key of an ECDSA pair loads; the private key is refused
// by name; a loaded key writes back as the same PEM.
func TestParsePublicKey(t *testing.T) {
	dir := t.TempDir()
	prefix := keys(t, dir, "k")
	pub, _ := os.ReadFile(trust.PubFile(prefix))
	priv, _ := os.ReadFile(trust.KeyFile(prefix))
	rsaPub, err := exec.Command("sh", "-c", "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 2>/dev/null | openssl pkey -pubout").Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	for _, tc := range []struct {
		name string
		pem  []byte
		want string // "" loads
	}{
		{"public key", pub, ""},
		{"private key", priv, "never the private .key"},
		{"not PEM", []byte("ssh-ed25519 AAAA"), "not a PEM public key"},
		{"two keys", append(append([]byte{}, pub...), pub...), "more than one PEM block"},
		{"RSA", rsaPub, "ECDSA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := trust.ParsePublicKey("K.pub", tc.pem)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				again, err := k.PEM()
				if err != nil || string(again) != string(pub) {
					t.Errorf("PEM() = %s, %v; want %s", again, err, pub)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "K.pub") {
				t.Errorf("ParsePublicKey = %v, want an error naming K.pub saying %q", err, tc.want)
			}
		})
	}
	s := signer(t, prefix)
	k, err := s.PublicKey()
	if err != nil || k.Fingerprint != publicKey(t, prefix).Fingerprint {
		t.Errorf("the signer's public key %s (%v) is not PREFIX.pub's", k.Fingerprint, err)
	}
}

// cosign, built from its own source, verifies our blob signature (and refuses it over
// changed bytes); and we verify the signature cosign makes with the same key pair.
func TestBlobSignaturesWithCosign(t *testing.T) {
	dir := t.TempDir()
	prefix := keys(t, dir, "site")
	blob := filepath.Join(dir, "site_config.yaml")
	data := []byte("apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata: {name: s}\n")
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sig, err := signer(t, prefix).SignBlob(data)
	if err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, "ours.sig")
	if err := os.WriteFile(ours, []byte(sig), 0o644); err != nil {
		t.Fatal(err)
	}
	verify := func(file string) error {
		out, err := cosignCmd(t, "verify-blob", "--key", trust.PubFile(prefix), "--signature", ours, "--insecure-ignore-tlog=true", file).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "Verified OK") {
			t.Errorf("cosign verify-blob succeeded without saying Verified OK:\n%s", out)
		}
		return err
	}
	if err := verify(blob); err != nil {
		t.Errorf("cosign verify-blob refuses our signature: %v", err)
	}
	changed := filepath.Join(dir, "changed.yaml")
	os.WriteFile(changed, append(append([]byte{}, data...), '#'), 0o644)
	if err := verify(changed); err == nil {
		t.Error("cosign verify-blob accepted our signature over changed bytes")
	}

	theirs := filepath.Join(dir, "cosign.sig")
	if out, err := cosignCmd(t, "sign-blob", "--key", trust.KeyFile(prefix), "--tlog-upload=false", "--yes",
		"--output-signature", theirs, blob).CombinedOutput(); err != nil {
		t.Fatalf("cosign sign-blob: %v\n%s", err, out)
	}
	b, err := os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	key := publicKey(t, prefix)
	if fp, err := trust.VerifyBlob([]trust.PublicKey{key}, data, b); err != nil || fp != key.Fingerprint {
		t.Errorf("VerifyBlob of cosign's signature = %q, %v", fp, err)
	}
	if _, err := trust.VerifyBlob([]trust.PublicKey{key}, append(data, '#'), b); !errors.Is(err, trust.ErrBlobNoKey) {
		t.Errorf("VerifyBlob of cosign's signature over changed bytes = %v, want ErrBlobNoKey", err)
	}
}
