package siteconfig

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/seeds/site/siteconfig/isotest"
)

func testKey(t *testing.T, name string) (*trust.Signer, trust.PublicKey) {
	t.Helper()
	k := trusttest.New(t, name)
	return k.Signer, k.Public
}

// A signed medium carries the site config as Normalized writes it, its signature over
// exactly those bytes and the signer's fingerprint; Verify takes it with the signing key
// among others and refuses it, by reason, with other keys only. The medium's Digest tells
// media apart by content.
func TestSignedMedium(t *testing.T) {
	signer, key := testKey(t, "site")
	_, other := testKey(t, "other")
	sc, err := Load("testdata/site.yaml")
	if err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(t.TempDir(), "site.iso")
	if err := WriteMedium(context.Background(), sc, iso, MediumOptions{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	m, err := OpenMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := sc.Normalized()
	if string(m.Config) != string(norm) || m.SignedBy != key.Fingerprint || m.Label != VolumeLabel || m.ImageBased {
		t.Errorf("medium %+v", m)
	}
	if fp, err := trust.VerifyBlob([]trust.PublicKey{key}, norm, m.Signature); err != nil || fp != key.Fingerprint {
		t.Errorf("the signature does not cover the normalized site config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		keys   []trust.PublicKey
		reason error // nil: accepted
		msg    string
	}{
		{"the signing key", []trust.PublicKey{key}, nil, ""},
		{"among others", []trust.PublicKey{other, key}, nil, ""},
		{"another key only", []trust.PublicKey{other}, trust.ErrBlobNoKey, "it is signed by key " + trust.ShortFingerprint(key.Fingerprint)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, err := m.Verify(tc.keys)
			var re *RefusedError
			switch {
			case tc.reason == nil && (err != nil || fp != key.Fingerprint):
				t.Errorf("Verify = %s, %v", fp, err)
			case tc.reason != nil && (!errors.Is(err, tc.reason) || !errors.Is(err, ErrRefused) || !errors.As(err, &re) || re.Path != iso || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("Verify = %v, want %v saying %q", err, tc.reason, tc.msg)
			}
		})
	}
	got, err := ReadMedium(iso)
	if err != nil || got.Spec.Hostname != sc.Spec.Hostname {
		t.Errorf("ReadMedium of a signed medium: %v", err)
	}

	unsigned := filepath.Join(t.TempDir(), "unsigned.iso")
	if err := Write(context.Background(), sc, unsigned); err != nil {
		t.Fatal(err)
	}
	u, err := OpenMedium(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	if u.Signature != nil || u.SignedBy != "" {
		t.Errorf("an unsigned medium has signature files: %+v", u)
	}
	if _, err := u.Verify([]trust.PublicKey{key}); !errors.Is(err, trust.ErrBlobUnsigned) {
		t.Errorf("Verify of an unsigned medium = %v", err)
	}
	if u.Digest() == m.Digest() {
		t.Error("signed and unsigned media of one site config have one digest")
	}
	again, _ := OpenMedium(iso)
	if again.Digest() != m.Digest() {
		t.Error("one medium read twice has two digests")
	}
}

// A signer file that does not hold a fingerprint is ignored, never quoted.
func TestSignerHintIgnored(t *testing.T) {
	signer, key := testKey(t, "site")
	sc, err := Load("testdata/dhcp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := sc.Normalized()
	sig, err := signer.SignBlob(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, hint := range []string{"not a fingerprint", strings.Repeat("A", 64), strings.Repeat("a", 65)} {
		m := openHinted(t, data, sig, hint)
		if m.SignedBy != "" {
			t.Errorf("hint %q taken as a fingerprint", hint)
		}
		if fp, err := m.Verify([]trust.PublicKey{key}); err != nil || fp != key.Fingerprint {
			t.Errorf("with hint %q: Verify = %v", hint, err)
		}
	}
}

// openHinted writes a medium by hand with the site config, its signature and signer hint.
func openHinted(t *testing.T, config []byte, sig, hint string) *Medium {
	t.Helper()
	iso := isotest.Write(t, filepath.Join(t.TempDir(), "hand.iso"), VolumeLabel,
		map[string]string{ConfigFileName: string(config), SignatureFileName: sig, SignerFileName: hint})
	m, err := OpenMedium(iso)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
