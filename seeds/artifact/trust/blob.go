package trust

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/snofactory/snofactory/seeds/artifact/trust/pubkey"
)

// Blob signatures are cosign's `sign-blob` format: the base64 ASN.1 ECDSA signature of the
// sha256 of the blob's bytes, so `cosign verify-blob --key K.pub --signature S FILE`
// checks what SignBlob made, and VerifyBlob checks what cosign made.

// Why VerifyBlob refused a blob; each refusal wraps one of these.
var (
	// ErrBlobUnsigned: there is no signature.
	ErrBlobUnsigned = errors.New("unsigned")
	// ErrBlobSignatureMalformed: the signature is not base64 of an ASN.1 ECDSA signature.
	ErrBlobSignatureMalformed = errors.New("malformed signature")
	// ErrBlobNoKey: no key verifies the signature: another key made it, or the blob
	// changed after it was signed.
	ErrBlobNoKey = errors.New("no trusted key verifies the signature")
)

// maxBlobSignature bounds a signature read from untrusted media: an ECDSA P-521 signature
// is at most 139 bytes, 188 in base64.
const maxBlobSignature = 1024

// PublicKey is a sigstore public key (the PEM PREFIX.pub of `snofactory keys generate` or
// `cosign generate-key-pair`) with its fingerprint.
type PublicKey = pubkey.Key

// ParsePublicKey reads one PEM "PUBLIC KEY" block holding an ECDSA key; name names the
// key in errors.
func ParsePublicKey(name string, b []byte) (PublicKey, error) { return pubkey.Parse(name, b) }

// LoadPublicKey reads and parses the public key file at path.
func LoadPublicKey(path string) (PublicKey, error) {
	b, err := readSmall(path)
	if err != nil {
		return PublicKey{}, fmt.Errorf("reading the public key: %w", err)
	}
	return ParsePublicKey(path, b)
}

// SignBlob signs data as `cosign sign-blob --key` does and returns the base64 signature.
func (s *Signer) SignBlob(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing a blob: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() (PublicKey, error) { return pubkey.FromECDSA(&s.key.PublicKey) }

// VerifyBlob checks sig, a base64 signature as SignBlob and `cosign sign-blob` write it
// (white space around it is ignored), over data against keys, and returns the fingerprint
// of the key that verified it. A refusal wraps ErrBlobUnsigned, ErrBlobSignatureMalformed
// or ErrBlobNoKey.
func VerifyBlob(keys []PublicKey, data, sig []byte) (string, error) {
	if len(keys) == 0 {
		return "", errors.New("no keys to verify the signature with")
	}
	sig = bytes.TrimSpace(sig)
	if len(sig) == 0 {
		return "", ErrBlobUnsigned
	}
	if len(sig) > maxBlobSignature {
		return "", fmt.Errorf("%w: %d bytes, an ECDSA signature is at most %d", ErrBlobSignatureMalformed, len(sig), maxBlobSignature)
	}
	raw, err := base64.StdEncoding.DecodeString(string(sig))
	if err != nil {
		return "", fmt.Errorf("%w: not base64: %v", ErrBlobSignatureMalformed, err)
	}
	// Parsed first, so a garbled signature is told apart from one by another key.
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(raw, &rs); err != nil || len(rest) > 0 || rs.R.Sign() <= 0 || rs.S.Sign() <= 0 {
		return "", fmt.Errorf("%w: not an ASN.1 ECDSA signature", ErrBlobSignatureMalformed)
	}
	sum := sha256.Sum256(data)
	fps := make([]string, 0, len(keys))
	for _, k := range keys {
		if k.ECDSA() != nil && ecdsa.VerifyASN1(k.ECDSA(), sum[:], raw) {
			return k.Fingerprint, nil
		}
		fps = append(fps, k.Fingerprint)
	}
	return "", fmt.Errorf("%w: none of the %d keys (%s) made it: another key did, or the signed content changed after signing",
		ErrBlobNoKey, len(keys), strings.Join(shortFingerprints(fps), ", "))
}

// ShortFingerprint is the first 16 hex digits of a fingerprint, enough to tell keys apart
// in a message.
func ShortFingerprint(fp string) string {
	if len(fp) > 16 {
		return fp[:16]
	}
	return fp
}

func shortFingerprints(fps []string) []string {
	out := make([]string, len(fps))
	for i, fp := range fps {
		out[i] = ShortFingerprint(fp)
	}
	return out
}
