package pipeline

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"io/fs"
	"os"
	"path/filepath"
)

// SecretSource hands secret values to stages. Values never enter logs, keys or records.
type SecretSource interface {
	Secret(name string) ([]byte, error)
}

// SecretFiles is a SecretSource backed by files named in the blueprint (pull secret, SSH key).
type SecretFiles map[string]string

// MaxSecretFile bounds a secret file (a pull secret, an SSH key, a registry auth file): real
// ones are a few KiB; a file larger than this, or a FIFO or device, was named by mistake.
const MaxSecretFile = 1 << 20

// Secret reads the named secret's file.
func (s SecretFiles) Secret(name string) ([]byte, error) {
	p, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("secret %q is not configured", name)
	}
	b, err := smallfile.Read(p, MaxSecretFile)
	if err != nil {
		return nil, fmt.Errorf("reading secret %q: %w", name, err)
	}
	return b, nil
}

// hmacKey returns this cache's random key for secret digests, creating it (0600) on first
// use. A per-cache key means a leaked cache key or run record cannot be used to test guesses
// of a pull secret offline.
func hmacKey(cacheDir string) ([]byte, error) {
	p := filepath.Join(cacheDir, "secret-digest.key")
	b, err := os.ReadFile(p)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading cache secret key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	// Link, not rename: if another build created the key first, keep theirs, so every build
	// of this cache derives the same digests.
	tmp := p + ".new-" + hex.EncodeToString(k[:6])
	if err := WriteFileAtomic(tmp, k, 0o600); err != nil {
		return nil, fmt.Errorf("writing cache secret key: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("writing cache secret key: %w", err)
	}
	return os.ReadFile(p)
}

func secretDigest(key, value []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(value)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// SecretSet serves secrets from files or from values given inline (a blueprint may hold an
// SSH public key inline and a pull secret as a file).
type SecretSet struct {
	Files  SecretFiles
	Values map[string][]byte
}

// Secret implements SecretSource: an inline value first, then a file.
func (s SecretSet) Secret(name string) ([]byte, error) {
	if v, ok := s.Values[name]; ok {
		return v, nil
	}
	if _, ok := s.Files[name]; ok {
		return s.Files.Secret(name)
	}
	return nil, fmt.Errorf("secret %s is not configured in the blueprint", name)
}
