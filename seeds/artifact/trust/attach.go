package trust

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
)

// SignSeed signs that the manifest top is the seed at ref (a registry reference with a
// tag) and attaches the signature where podman, skopeo and cosign look for it. The
// manifests of an index (instances) are signed as well, as cosign sign --recursive does:
// a copy of the whole index checks each. at is the signatures' timestamp.
func SignSeed(ctx context.Context, s *Signer, ref string, top digest.Digest, instances []digest.Digest, at time.Time, opts ...ociseed.Option) error {
	identity, err := dockerReference(ref)
	if err != nil {
		return err
	}
	for _, m := range append([]digest.Digest{top}, instances...) {
		sig, err := s.Sign(m, identity, at)
		if err != nil {
			return err
		}
		layer := ociseed.SignatureLayer{MediaType: MediaTypeSignature, Payload: sig.Payload,
			Annotations: map[string]string{AnnotationSignature: sig.Base64}}
		if err := ociseed.AttachSignature(ctx, ref, m, layer, opts...); err != nil {
			return err
		}
	}
	return nil
}

// AttestSeed signs predicate (of predicateType) about the seed manifest top at ref as an
// in-toto statement in a DSSE envelope, and attaches it the way cosign attest does
// ("sha256-<hex>.att"), replacing an earlier attestation of the same type.
func AttestSeed(ctx context.Context, s *Signer, ref string, top digest.Digest, predicateType string, predicate json.RawMessage, opts ...ociseed.Option) error {
	loc, err := ociseed.ParseLocation(ref, true)
	if err != nil {
		return err
	}
	st, err := NewStatement(loc.Ref.Context().Name(), top, predicateType, predicate)
	if err != nil {
		return err
	}
	env, err := s.Attest(st)
	if err != nil {
		return err
	}
	layer := ociseed.SignatureLayer{MediaType: MediaTypeDSSE, Payload: env,
		// cosign writes an empty signature annotation on attestations: the envelope holds it.
		Annotations: map[string]string{AnnotationPredicateType: predicateType, AnnotationSignature: ""}}
	if err := ociseed.AttachAttestation(ctx, ref, top, layer, AnnotationPredicateType, opts...); err != nil {
		return fmt.Errorf("attaching the %s attestation: %w", predicateType, err)
	}
	return nil
}

// dockerReference is the identity a signature claims for ref: registry/repository:tag.
func dockerReference(ref string) (string, error) {
	loc, err := ociseed.ParseLocation(ref, true)
	if err != nil {
		return "", err
	}
	if loc.Transport != ociseed.TransportRegistry {
		return "", fmt.Errorf("%s is not a registry: signatures are attached in a registry", ref)
	}
	return loc.Ref.String(), nil
}
