package trust

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
)

// Attached is what a registry holds about one seed manifest: its sigstore signatures and
// attestations, each described and, when keys are given, checked.
type Attached struct {
	Digest       digest.Digest     `json:"digest"`
	Signatures   []SignatureInfo   `json:"signatures"`
	Attestations []AttestationInfo `json:"attestations"`
}

// SignatureInfo is one signature: what its payload claims and whether a key verified it.
type SignatureInfo struct {
	// Claims is the manifest digest the payload says was signed; Identity the
	// registry/repository:tag it was signed as.
	Claims   digest.Digest `json:"claims"`
	Identity string        `json:"identity"`
	Creator  string        `json:"creator,omitempty"`
	Signed   time.Time     `json:"signed,omitzero"`
	// VerifiedBy is the fingerprint of the given key that verified the signature; empty
	// when none did (see Problem) or no key was given.
	VerifiedBy string `json:"verifiedBy,omitempty"`
	Problem    string `json:"problem,omitempty"`
}

// AttestationInfo is one attestation: its predicate type and whether a key verified it.
type AttestationInfo struct {
	PredicateType string `json:"predicateType"`
	Size          int    `json:"size"`
	VerifiedBy    string `json:"verifiedBy,omitempty"`
	Problem       string `json:"problem,omitempty"`
	// Predicate is the statement's predicate, kept for callers that print it (an SBOM);
	// not part of the JSON description.
	Predicate json.RawMessage `json:"-"`
}

// Inspect reads the signatures and attestations attached to the seed manifest d at ref
// and checks each against keys (none: described, not checked). Nothing attached is not an
// error; a malformed attachment is described with its problem.
func Inspect(ctx context.Context, ref string, d digest.Digest, keys []PublicKey, opts ...ociseed.Option) (*Attached, error) {
	out := &Attached{Digest: d, Signatures: []SignatureInfo{}, Attestations: []AttestationInfo{}}
	sigs, err := ociseed.Attachments(ctx, ref, d, ociseed.KindSignature, opts...)
	if err != nil {
		return nil, err
	}
	for _, l := range sigs {
		out.Signatures = append(out.Signatures, describeSignature(l, d, keys))
	}
	atts, err := ociseed.Attachments(ctx, ref, d, ociseed.KindAttestation, opts...)
	if err != nil {
		return nil, err
	}
	for _, l := range atts {
		out.Attestations = append(out.Attestations, describeAttestation(l, d, keys))
	}
	return out, nil
}

func describeSignature(l ociseed.SignatureLayer, d digest.Digest, keys []PublicKey) SignatureInfo {
	var info SignatureInfo
	var p payload
	if err := strictjson.DecodeOpen(l.Payload, &p); err != nil {
		info.Problem = "the payload is not a cosign container image signature: " + err.Error()
		return info
	}
	info.Claims = digest.Digest(p.Critical.Image.DockerManifestDigest)
	info.Identity = p.Critical.Identity.DockerReference
	if c, ok := p.Optional["creator"].(string); ok {
		info.Creator = c
	}
	if ts, ok := p.Optional["timestamp"].(float64); ok {
		info.Signed = time.Unix(int64(ts), 0).UTC()
	}
	if info.Claims != d {
		info.Problem = fmt.Sprintf("signs %s, not this manifest", info.Claims)
		return info
	}
	if len(keys) == 0 {
		return info
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[AnnotationSignature])
	if err != nil || len(sig) == 0 {
		info.Problem = "no signature in the " + AnnotationSignature + " annotation"
		return info
	}
	sum := sha256.Sum256(l.Payload)
	for _, k := range keys {
		if k.ECDSA() != nil && ecdsa.VerifyASN1(k.ECDSA(), sum[:], sig) {
			info.VerifiedBy = k.Fingerprint
			return info
		}
	}
	info.Problem = "no given key verifies it"
	return info
}

func describeAttestation(l ociseed.SignatureLayer, d digest.Digest, keys []PublicKey) AttestationInfo {
	info := AttestationInfo{PredicateType: l.Annotations[AnnotationPredicateType], Size: len(l.Payload)}
	st, who, err := OpenEnvelope(l.Payload, keys)
	if err != nil {
		info.Problem = err.Error()
		return info
	}
	info.PredicateType, info.Predicate = st.PredicateType, st.Predicate
	switch {
	case !st.About(d):
		info.Problem = "its subject is another manifest"
	case who >= 0:
		info.VerifiedBy = keys[who].Fingerprint
	}
	return info
}
