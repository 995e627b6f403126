package diskpack

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/zeebo/blake3"
)

// Checker hashes a chunk's stored bytes as they go by and says whether they are the
// chunk's: by its Check where the index has one (version 2), else by its blob digest.
type Checker struct {
	hash.Hash
	want digest.Digest
	alg  string
}

func newChecker(blob digest.Digest, check string) *Checker {
	if check != "" {
		return &Checker{Hash: blake3.New(), want: digest.Digest(check), alg: CheckAlgorithm}
	}
	return &Checker{Hash: sha256.New(), want: blob, alg: string(digest.SHA256)}
}

// Checker checks c's stored bytes.
func (c Chunk) Checker() *Checker { return newChecker(c.Blob, c.Check) }

// Checker checks b's stored bytes.
func (b Blob) Checker() *Checker { return newChecker(b.Digest, b.Check) }

// Got is the hash of what was written, as the index would write it.
func (k *Checker) Got() digest.Digest {
	return digest.Digest(k.alg + ":" + hex.EncodeToString(k.Sum(nil)))
}

// Want is what the index says.
func (k *Checker) Want() digest.Digest { return k.want }

// OK tells whether what was written is the chunk's stored bytes.
func (k *Checker) OK() bool { return k.Got() == k.want }

// What names the check in errors: "blob digest" or "blake3 check".
func (k *Checker) What() string {
	if k.alg == CheckAlgorithm {
		return CheckAlgorithm + " check"
	}
	return "blob digest"
}

// storedOK checks a chunk's whole stored bytes at once.
func storedOK(k *Checker, stored []byte) bool {
	k.Write(stored)
	return k.OK()
}

// sha256Of is the sha256 digest of b: a chunk's ID (of its raw bytes) or blob digest (of
// its stored bytes).
func sha256Of(b []byte) digest.Digest {
	sum := sha256.Sum256(b)
	return digest.NewDigestFromBytes(digest.SHA256, sum[:])
}

// checkOf is the Check of stored bytes.
func checkOf(stored []byte) string {
	sum := blake3.Sum256(stored)
	return CheckAlgorithm + ":" + hex.EncodeToString(sum[:])
}

func validCheck(s string) bool {
	h, ok := strings.CutPrefix(s, CheckAlgorithm+":")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}
