package trust

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// What an attestation is, as in-toto, DSSE and cosign name it.
const (
	// MediaTypeDSSE is the media type of a DSSE envelope attached as a layer of a cosign
	// attestation ("sha256-<hex>.att").
	MediaTypeDSSE = "application/vnd.dsse.envelope.v1+json"
	// PayloadTypeInToto is the DSSE payload type of an in-toto statement.
	PayloadTypeInToto = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 "_type".
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateSLSAProvenance is SLSA v1 provenance (cosign --type slsaprovenance1).
	PredicateSLSAProvenance = "https://slsa.dev/provenance/v1"
	// PredicateSPDX is an SPDX document (cosign --type spdxjson).
	PredicateSPDX = "https://spdx.dev/Document"
	// AnnotationPredicateType names an attestation layer's predicate type, as cosign
	// writes it.
	AnnotationPredicateType = "predicateType"
)

// Statement is an in-toto Statement v1: a predicate about subjects named by digest.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject is an artifact a statement is about.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// NewStatement says predicate (of predicateType) about the artifact name with digest d.
func NewStatement(name string, d digest.Digest, predicateType string, predicate json.RawMessage) (Statement, error) {
	if err := d.Validate(); err != nil {
		return Statement{}, fmt.Errorf("statement about %s: %w", name, err)
	}
	if !json.Valid(predicate) {
		return Statement{}, fmt.Errorf("statement about %s: the %s predicate is not JSON", name, predicateType)
	}
	return Statement{Type: StatementType, PredicateType: predicateType, Predicate: predicate,
		Subject: []Subject{{Name: name, Digest: map[string]string{string(d.Algorithm()): d.Encoded()}}}}, nil
}

// About reports whether the statement names the artifact with digest d as a subject.
func (s Statement) About(d digest.Digest) bool {
	for _, sub := range s.Subject {
		if sub.Digest[string(d.Algorithm())] == d.Encoded() {
			return true
		}
	}
	return false
}

// Envelope is a DSSE envelope; JSON encodes its byte fields in standard base64, as DSSE
// requires.
type Envelope struct {
	PayloadType string              `json:"payloadType"`
	Payload     []byte              `json:"payload"`
	Signatures  []EnvelopeSignature `json:"signatures"`
}

// EnvelopeSignature is one signature of an envelope. KeyID is empty, as cosign leaves it:
// the verifier's key decides.
type EnvelopeSignature struct {
	KeyID string `json:"keyid"`
	Sig   []byte `json:"sig"`
}

// pae is DSSE's pre-authentication encoding: what is actually signed, binding the payload
// type to the payload.
func pae(payloadType string, payload []byte) []byte {
	b := []byte("DSSEv1 " + strconv.Itoa(len(payloadType)) + " " + payloadType + " " + strconv.Itoa(len(payload)) + " ")
	return append(b, payload...)
}

// Attest signs the statement as a DSSE envelope and returns the envelope's JSON.
func (s *Signer) Attest(st Statement) ([]byte, error) {
	// Without HTML escaping, so the predicate keeps its bytes ("&" in a purl stays "&").
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, fmt.Errorf("encoding the %s statement: %w", st.PredicateType, err)
	}
	payload := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sum := sha256.Sum256(pae(PayloadTypeInToto, payload))
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sum[:])
	if err != nil {
		return nil, fmt.Errorf("signing the %s statement: %w", st.PredicateType, err)
	}
	return json.Marshal(Envelope{PayloadType: PayloadTypeInToto, Payload: payload, Signatures: []EnvelopeSignature{{Sig: sig}}})
}

// ErrBadAttestation is what every refused attestation wraps.
var ErrBadAttestation = errors.New("the attestation does not verify")

// maxEnvelope bounds an envelope read from a registry: an SBOM of a real node is a few MiB.
const maxEnvelope = 64 << 20

// OpenEnvelope parses a DSSE envelope holding an in-toto statement and, when keys are
// given, checks that one of them signed it; it returns the statement and the index of the
// key that verified it (-1 without keys). The envelope is untrusted input.
func OpenEnvelope(b []byte, keys []PublicKey) (Statement, int, error) {
	if len(b) > maxEnvelope {
		return Statement{}, -1, fmt.Errorf("%w: an envelope of %d bytes (at most %d)", ErrBadAttestation, len(b), maxEnvelope)
	}
	var env Envelope
	if err := strictjson.DecodeOpen(b, &env); err != nil {
		return Statement{}, -1, fmt.Errorf("%w: not a DSSE envelope: %v", ErrBadAttestation, err)
	}
	if env.PayloadType != PayloadTypeInToto {
		return Statement{}, -1, fmt.Errorf("%w: payload type %q, not an in-toto statement", ErrBadAttestation, env.PayloadType)
	}
	verified := -1
	if len(keys) > 0 {
		sum := sha256.Sum256(pae(env.PayloadType, env.Payload))
	search:
		for _, sig := range env.Signatures {
			for i, k := range keys {
				if k.ECDSA() != nil && ecdsa.VerifyASN1(k.ECDSA(), sum[:], sig.Sig) {
					verified = i
					break search
				}
			}
		}
		if verified < 0 {
			return Statement{}, -1, fmt.Errorf("%w: none of its %d signatures is by a given key (changed after signing, or signed by another key)",
				ErrBadAttestation, len(env.Signatures))
		}
	}
	var st Statement
	if err := strictjson.DecodeOpen(env.Payload, &st); err != nil {
		return Statement{}, -1, fmt.Errorf("%w: the payload is not an in-toto statement: %v", ErrBadAttestation, err)
	}
	if st.Type != StatementType {
		return Statement{}, -1, fmt.Errorf("%w: statement type %q, not %s", ErrBadAttestation, st.Type, StatementType)
	}
	return st, verified, nil
}
