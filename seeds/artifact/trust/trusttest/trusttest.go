// Package trusttest makes sigstore key pairs for tests, as snofactory keys generate
// writes them (PREFIX.key, encrypted with a passphrase, and PREFIX.pub), opened for
// signing and verifying.
package trusttest

import (
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// Key is a generated key pair, on disk and opened.
type Key struct {
	// Prefix names the files: Prefix.key and Prefix.pub.
	Prefix     string
	Passphrase []byte
	Signer     *trust.Signer
	Public     trust.PublicKey
}

// KeyFile is the encrypted private key's file.
func (k Key) KeyFile() string { return trust.KeyFile(k.Prefix) }

// PubFile is the public key's file.
func (k Key) PubFile() string { return trust.PubFile(k.Prefix) }

// Generate writes a key pair at prefix, encrypted with passphrase, and opens it.
func Generate(t testing.TB, prefix, passphrase string) Key {
	t.Helper()
	pass := []byte(passphrase)
	if err := trust.GenerateKeys(prefix, pass); err != nil {
		t.Fatal(err)
	}
	s, err := trust.LoadSigner(trust.KeyFile(prefix), pass, "test")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := trust.LoadPublicKey(trust.PubFile(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return Key{Prefix: prefix, Passphrase: pass, Signer: s, Public: pub}
}

// New is Generate under a new temporary directory, named name, with the passphrase
// "pass".
func New(t testing.TB, name string) Key {
	t.Helper()
	return Generate(t, filepath.Join(t.TempDir(), name), "pass")
}
