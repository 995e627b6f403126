package siteconfig

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/bcrypt"
)

func identity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Sealing takes the pull secret, the kubeadmin password hash and the retained keys out of
// the clear: the medium's bytes hold none of them; the seed's identity, and only it, puts
// them back exactly, and the opened site config validates as the original did.
func TestSealedSecretsRoundTrip(t *testing.T) {
	sc, err := Load("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("site password"), bcrypt.MinCost)
	sc.Spec.KubeadminPasswordHash = string(hash)
	want := sc.Spec
	seed, stranger := identity(t), identity(t)
	if err := sc.EncryptSecrets([]age.Recipient{seed.Recipient()}); err != nil {
		t.Fatal(err)
	}
	if sc.Spec.PullSecret != "" || sc.Spec.KubeadminPasswordHash != "" || !strings.HasPrefix(sc.Spec.SealedSecrets, sealedArmor) {
		t.Fatalf("sealed spec still holds secrets or no armor: %+v", sc.Spec)
	}
	iso := filepath.Join(t.TempDir(), "site.iso")
	if err := Write(context.Background(), sc, iso); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(iso)
	for _, s := range []string{secret, string(hash)} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the sealed medium holds %q in clear", s)
		}
	}
	onMedium, err := ReadMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	if err := onMedium.DecryptSecrets(stranger); !errors.As(err, new(*age.NoIdentityMatchError)) {
		t.Errorf("DecryptSecrets with another identity = %v", err)
	}
	if err := onMedium.DecryptSecrets(stranger, seed); err != nil {
		t.Fatal(err)
	}
	got := onMedium.Spec
	if got.PullSecret != want.PullSecret || got.KubeadminPasswordHash != want.KubeadminPasswordHash || got.SealedSecrets != "" {
		t.Errorf("unsealed spec differs: pull secret same %v, hash same %v", got.PullSecret == want.PullSecret, got.KubeadminPasswordHash == want.KubeadminPasswordHash)
	}
	if err := sc.EncryptSecrets([]age.Recipient{seed.Recipient()}); err == nil {
		t.Error("sealing twice was accepted")
	}
	empty, _ := Load("testdata/dhcp.yaml")
	if err := empty.EncryptSecrets([]age.Recipient{seed.Recipient()}); !errors.Is(err, ErrNothingToSeal) {
		t.Errorf("sealing a site config without secrets = %v", err)
	}
}

// What spec.sealedSecrets opens to is checked as strictly as secrets in clear, and no
// message quotes it.
func TestDecryptSecretsRefuses(t *testing.T) {
	id := identity(t)
	for _, tc := range []struct{ name, plain, want string }{
		{"bad pull secret", "pullSecret: '{\"auths\": ... " + secret + "'\n", "spec.pullSecret: the pull secret is not valid JSON"},
		{"bad hash", "kubeadminPasswordHash: " + secret + "\n", "spec.kubeadminPasswordHash: is not a bcrypt hash"},
		{"unknown field", "token: " + secret + "\n", "open to something other than the secrets site-config create seals"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &SiteConfig{Spec: Spec{SealedSecrets: sealRaw(t, id.Recipient(), tc.plain)}}
			err := sc.DecryptSecrets(id)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
				t.Errorf("DecryptSecrets = %v, want %q and no secret", err, tc.want)
			}
		})
	}
}

// sealRaw encrypts plain to r in ASCII armor, as Seal does.
func sealRaw(t *testing.T, r age.Recipient, plain string) string {
	t.Helper()
	var out bytes.Buffer
	if err := armorEncrypt(&out, []byte(plain), r); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// spec.sealedSecrets must be age armor and comes alone: never beside the secrets in clear.
func TestSealedSecretsValidation(t *testing.T) {
	id := identity(t)
	armored := sealRaw(t, id.Recipient(), "pullSecret: x\n")
	block := "  sealedSecrets: |\n    " + strings.ReplaceAll(strings.TrimSpace(armored), "\n", "\n    ") + "\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"sealed", head + block, ""},
		{"not armor", head + "  sealedSecrets: hello\n", "is not age-encrypted secrets in ASCII armor"},
		{"beside a pull secret", head + block + "  pullSecretFile: ps.json\n", "comes with secrets in clear as well"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Load = %v, want %q", err, tc.want)
			}
		})
	}
}
