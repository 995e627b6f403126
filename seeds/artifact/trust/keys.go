// Package trust signs seeds and checks them against the containers trust policy, in the
// formats podman, skopeo and cosign use: sigstore key pairs, sigstore signatures attached
// to the registry as "sha256-<digest>.sig" tags, /etc/containers/policy.json and
// registries.d.
package trust

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/containers/image/v5/signature/sigstore"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// KeyFile and PubFile are the files GenerateKeys writes for a prefix.
func KeyFile(prefix string) string { return prefix + ".key" }
func PubFile(prefix string) string { return prefix + ".pub" }

// GenerateKeys writes a sigstore key pair: PREFIX.key, the private key encrypted with
// passphrase (0600), and PREFIX.pub. Both go through the output rules first (never one of
// inputs, such as the passphrase file, never a character device or a path whose directory
// does not exist, never one file for both), and neither may exist: a key is never
// overwritten. A refusal is the user's input (badinput or output.IsRefused); a failure to
// write is not.
func GenerateKeys(prefix string, passphrase []byte, inputs ...string) error {
	if len(passphrase) == 0 {
		return badinput.Errorf("an empty passphrase: a private key is always encrypted")
	}
	outs := []output.Named{{Flag: "the private key", Path: KeyFile(prefix)}, {Flag: "the public key", Path: PubFile(prefix)}}
	if err := output.CheckAll(outs, inputs...); err != nil {
		return err
	}
	for _, o := range outs {
		if _, err := os.Lstat(o.Path); err == nil {
			return badinput.Errorf("%s exists: a key is never overwritten; remove it or choose another prefix", o.Path)
		}
	}
	pair, err := sigstore.GenerateKeyPair(passphrase)
	if err != nil {
		return fmt.Errorf("generating a key pair: %w", err)
	}
	if err := writeNew(KeyFile(prefix), pair.PrivateKey, 0o600); err != nil {
		return err
	}
	if err := writeNew(PubFile(prefix), pair.PublicKey, 0o644); err != nil {
		os.Remove(KeyFile(prefix))
		return err
	}
	return nil
}

// writeNew creates path, which must not exist (O_EXCL), after GenerateKeys ran the output
// rules on it: unlike output.Write's rename, which would replace a key made meanwhile, a
// key is never overwritten. A failed write removes what it created.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// maxKeyFile bounds a key file: real ones are a few hundred bytes.
const maxKeyFile = 64 << 10

// loadPrivateKey reads an encrypted sigstore (or cosign) private key.
func loadPrivateKey(path string, passphrase []byte) (*ecdsa.PrivateKey, error) {
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	return parsePrivateKey(path, b, passphrase)
}

// parsePrivateKey decrypts the PEM b of an encrypted sigstore private key; path names it
// in errors.
func parsePrivateKey(path string, b, passphrase []byte) (*ecdsa.PrivateKey, error) {
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: not a key file (at most %d bytes)", path, maxKeyFile)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: not a PEM file", path)
	}
	switch block.Type {
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
	default:
		return nil, fmt.Errorf("%s: a %q, not an encrypted sigstore private key (snofactory keys generate makes one)", path, block.Type)
	}
	der, err := encrypted.Decrypt(block.Bytes, passphrase)
	if err != nil {
		return nil, fmt.Errorf("%s: decrypting the key: wrong passphrase? (%w)", path, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T key; sigstore signatures here are ECDSA", path, k)
	}
	return ec, nil
}

// readSmall reads a key file: a regular file of at most maxKeyFile bytes.
func readSmall(path string) ([]byte, error) {
	b, err := smallfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("not a key file: %w", err)
	}
	return b, nil
}

// PassphraseEnv is the environment variable a key's passphrase comes from when no file
// names it.
const PassphraseEnv = "SNOFACTORY_KEY_PASSPHRASE"

// Passphrase reads a key's passphrase from file, else from the environment variable env;
// never from a flag's value, which other users can see in the process list.
func Passphrase(file, env string) ([]byte, error) {
	if file != "" {
		b, err := readSmall(file)
		if err != nil {
			return nil, fmt.Errorf("--passphrase-file: %w", err)
		}
		line, _, _ := bytes.Cut(b, []byte("\n"))
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
	if v, ok := os.LookupEnv(env); ok {
		return []byte(v), nil
	}
	return nil, fmt.Errorf("no passphrase: give --passphrase-file FILE or set %s", env)
}
