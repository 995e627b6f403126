// Package pubkey reads sigstore public keys and names them by fingerprint. It has no
// dependency beyond the standard library, so a blueprint's loader can check the keys it
// names without linking the trust policy machinery.
package pubkey

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
)

// Key is a sigstore public key (the PEM PREFIX.pub of `snofactory keys generate` or
// `cosign generate-key-pair`) that verifies signatures.
type Key struct {
	key *ecdsa.PublicKey
	// Fingerprint is the sha256 of the key's DER SubjectPublicKeyInfo, in hex.
	Fingerprint string
}

// ECDSA is the key itself; nil for the zero Key.
func (k Key) ECDSA() *ecdsa.PublicKey { return k.key }

// Parse reads one PEM "PUBLIC KEY" block holding an ECDSA key; name names the key in
// errors.
func Parse(name string, b []byte) (Key, error) {
	block, rest := pem.Decode(b)
	if block == nil {
		return Key{}, fmt.Errorf("%s: not a PEM public key (a PREFIX.pub from snofactory keys generate)", name)
	}
	if block.Type != "PUBLIC KEY" {
		return Key{}, fmt.Errorf("%s: a PEM %q, want a \"PUBLIC KEY\" (the .pub file of the pair, never the private .key)", name, block.Type)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return Key{}, fmt.Errorf("%s: more than one PEM block; give one public key per file", name)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", name, err)
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return Key{}, fmt.Errorf("%s: a %T key; sigstore key pairs here are ECDSA (snofactory keys generate)", name, k)
	}
	sum := sha256.Sum256(block.Bytes)
	return Key{key: ec, Fingerprint: hex.EncodeToString(sum[:])}, nil
}

// FromECDSA names the key k by its fingerprint.
func FromECDSA(k *ecdsa.PublicKey) (Key, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return Key{}, fmt.Errorf("encoding the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return Key{key: k, Fingerprint: hex.EncodeToString(sum[:])}, nil
}

// PEM is the key as a PEM "PUBLIC KEY" block, the form PREFIX.pub holds.
func (k Key) PEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(k.key)
	if err != nil {
		return nil, fmt.Errorf("encoding the public key %s: %w", k.Fingerprint, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
