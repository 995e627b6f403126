package trust

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
)

// Media type and annotation of a sigstore signature as an attached layer: what
// containers/image, podman, skopeo and cosign read.
const (
	MediaTypeSignature  = "application/vnd.dev.cosign.simplesigning.v1+json"
	AnnotationSignature = "dev.cosignproject.cosign/signature"
)

// Signature is one sigstore signature: the payload that was signed and its signature.
type Signature struct {
	Payload []byte
	// Base64 is the ASN.1 ECDSA signature of the payload's sha256, base64-encoded, as
	// the AnnotationSignature annotation holds it.
	Base64 string
}

// Signer signs seed manifests with a sigstore private key.
type Signer struct {
	key     *ecdsa.PrivateKey
	creator string
}

// LoadSigner reads the encrypted private key at path. creator names the signing tool in
// the payload (e.g. "snofactory v1.2").
func LoadSigner(path string, passphrase []byte, creator string) (*Signer, error) {
	k, err := loadPrivateKey(path, passphrase)
	if err != nil {
		return nil, err
	}
	return &Signer{key: k, creator: creator}, nil
}

// ParseSigner is LoadSigner for a key already read (a secret handed to a stage); name says
// where it came from, for errors.
func ParseSigner(name string, pemKey, passphrase []byte, creator string) (*Signer, error) {
	k, err := parsePrivateKey(name, pemKey, passphrase)
	if err != nil {
		return nil, err
	}
	return &Signer{key: k, creator: creator}, nil
}

// payload is the "cosign container image signature" claim; containers/image reads exactly
// these fields.
type payload struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// Sign signs that the manifest with digest d is the seed named dockerReference
// (registry/repository:tag). at is the payload's timestamp.
func (s *Signer) Sign(d digest.Digest, dockerReference string, at time.Time) (Signature, error) {
	if err := d.Validate(); err != nil {
		return Signature{}, fmt.Errorf("signing %q: %w", d, err)
	}
	var p payload
	p.Critical.Identity.DockerReference = dockerReference
	p.Critical.Image.DockerManifestDigest = d.String()
	p.Critical.Type = "cosign container image signature"
	p.Optional = map[string]any{"creator": s.creator, "timestamp": at.Unix()}
	b, err := json.Marshal(p)
	if err != nil {
		return Signature{}, err
	}
	sum := sha256.Sum256(b)
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sum[:])
	if err != nil {
		return Signature{}, fmt.Errorf("signing %s: %w", d, err)
	}
	return Signature{Payload: b, Base64: base64.StdEncoding.EncodeToString(sig)}, nil
}
