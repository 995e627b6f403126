package trust

import (
	"bytes"
	"testing"
	"time"
)

func TestAttachedWriteFields(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sig := SignatureInfo{Identity: "reg/seed:1", Creator: "snofactory", Signed: at}
	att := AttestationInfo{PredicateType: PredicateSPDX, Size: 2048}
	for _, tc := range []struct {
		name    string
		a       Attached
		checked bool
		want    string
	}{
		{"nothing attached", Attached{Digest: "sha256:d"}, false,
			"Digest:\tsha256:d\nSignatures:\tnone\nAttestations:\tnone\n"},
		{"not checked", Attached{Digest: "sha256:d", Signatures: []SignatureInfo{sig}, Attestations: []AttestationInfo{att}}, false,
			"Digest:\tsha256:d\nSignature:\treg/seed:1, by snofactory at 2026-01-02T03:04:05Z: not checked (give --key PREFIX.pub)\n" +
				"Attestation:\t" + PredicateSPDX + ", 2KiB: not checked (give --key PREFIX.pub)\n"},
		{"checked", Attached{Digest: "sha256:d",
			Signatures:   []SignatureInfo{withKey(sig, "SHA256:k", ""), withKey(sig, "", "bad signature")},
			Attestations: []AttestationInfo{{PredicateType: "p", Size: 1, Problem: "no key"}}}, true,
			"Digest:\tsha256:d\nSignature:\treg/seed:1, by snofactory at 2026-01-02T03:04:05Z: verified by key SHA256:k\n" +
				"Signature:\treg/seed:1, by snofactory at 2026-01-02T03:04:05Z: NOT VERIFIED: bad signature\n" +
				"Attestation:\tp, 1B: NOT VERIFIED: no key\n"},
		// Identities and predicate types come from the registry (a signature's payload, an
		// attestation's annotation): an escape sequence or a newline in them is printed
		// escaped, so it neither drives the terminal nor forges a "verified" line.
		{"escape sequences from the registry", Attached{Digest: "sha256:d",
			Signatures:   []SignatureInfo{{Identity: "reg/\x1b[2Jseed:1", Creator: "x\rverified", Signed: at, Problem: "bad\nSignature:\tok"}},
			Attestations: []AttestationInfo{{PredicateType: "p\x1b]0;title\a", Size: 1}}}, true,
			"Digest:\tsha256:d\nSignature:\t\"reg/\\x1b[2Jseed:1\", by \"x\\rverified\" at 2026-01-02T03:04:05Z: NOT VERIFIED: bad\\nSignature:\\tok\n" +
				"Attestation:\t\"p\\x1b]0;title\\a\", 1B: \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.a.WriteFields(&b, tc.checked)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func withKey(s SignatureInfo, verifiedBy, problem string) SignatureInfo {
	s.VerifiedBy, s.Problem = verifiedBy, problem
	return s
}

func TestAttachedUntrusted(t *testing.T) {
	signed := &Attached{Signatures: []SignatureInfo{{VerifiedBy: "k"}}}
	for _, tc := range []struct {
		name    string
		a       *Attached
		checked bool
		want    string
	}{
		{"nothing attached", nil, true, ""},
		{"not checked", &Attached{}, false, ""},
		{"signed by a key", signed, true, ""},
		{"unsigned", &Attached{}, true, "reg/seed is not trusted: no signature by a given key"},
		{"a bad attestation", &Attached{Signatures: signed.Signatures, Attestations: []AttestationInfo{{PredicateType: "p", Problem: "tampered"}}}, true,
			"reg/seed is not trusted: the p attestation does not verify: tampered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := tc.a.Untrusted("reg/seed", tc.checked); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
