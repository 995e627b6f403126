package seedref_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// A local seed's device check reads the seed where it is: a written device verifies, and a
// changed byte does not.
func TestSeedVerifyDevice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 2 << 20, Formats: []string{seed.FormatRaw}, Seed: 7})
	s, err := seedref.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(t.TempDir(), "disk.img")
	if _, err := seed.WriteDevice(ctx, dir, dev); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "changed.img")
	b, _ := os.ReadFile(dev)
	b[(1<<20)+7] ^= 1
	os.WriteFile(changed, b, 0o644)
	for _, tc := range []struct {
		name, device string
		wantMismatch bool
	}{
		{"written", dev, false},
		{"a changed byte", changed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := s.VerifyDevice(ctx, tc.device)
			var mm *seed.MismatchError
			if tc.wantMismatch != errors.As(err, &mm) || (!tc.wantMismatch && (err != nil || d.RawDigest == "")) {
				t.Errorf("VerifyDevice: %+v, %v", d, err)
			}
		})
	}
}

// A seed directory's SBOM is its own file; a referenced seed's is its SPDX attestation,
// one a key verified when keys were given.
func TestSeedSBOM(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}, SBOM: true})
	own, err := seed.ReadSBOM(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	local, err := seedref.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	const ref = "127.0.0.1:5000/seeds/edge:1"
	remote, err := seedref.Open(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	doc := json.RawMessage(`{"spdxVersion":"SPDX-2.3"}`)
	spdx := func(verifiedBy, problem string) *trust.Attached {
		return &trust.Attached{Attestations: []trust.AttestationInfo{{PredicateType: trust.PredicateSPDX, Predicate: doc, VerifiedBy: verifiedBy, Problem: problem}}}
	}
	for _, tc := range []struct {
		name     string
		s        *seedref.Seed
		attached *trust.Attached
		checked  bool
		want     []byte
		wantErr  string
	}{
		{"a seed directory's file", local, nil, true, own, ""},
		{"an attestation, unchecked", remote, spdx("", ""), false, doc, ""},
		{"an attestation a key verified", remote, spdx("SHA256:k", ""), true, doc, ""},
		{"an attestation no key verified", remote, spdx("", "bad signature"), true, nil, ref + ": its SBOM attestation does not verify: bad signature"},
		{"no attestation", remote, &trust.Attached{}, false, nil, ref + ": " + trust.ErrNoSBOM.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.SBOM(m, tc.attached, tc.checked)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
