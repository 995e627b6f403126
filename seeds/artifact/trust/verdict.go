package trust

import (
	"errors"
	"fmt"
)

// Problems says why a seed whose attachments were checked against keys is not trusted:
// it must carry a signature one of the keys verifies, and every attestation must verify.
// None: it is trusted.
func (a *Attached) Problems() []string {
	var problems []string
	signed := false
	for _, s := range a.Signatures {
		signed = signed || s.VerifiedBy != ""
	}
	if !signed {
		problems = append(problems, "no signature by a given key")
	}
	for _, at := range a.Attestations {
		if at.VerifiedBy == "" {
			problems = append(problems, fmt.Sprintf("the %s attestation does not verify: %s", at.PredicateType, at.Problem))
		}
	}
	return problems
}

// SBOM is the seed's SPDX document from its attestation; with checked (keys were given),
// only an attestation a key verified.
func (a *Attached) SBOM(checked bool) ([]byte, error) {
	for _, at := range a.Attestations {
		if at.PredicateType != PredicateSPDX || at.Predicate == nil {
			continue
		}
		if checked && at.VerifiedBy == "" {
			return nil, fmt.Errorf("its SBOM attestation does not verify: %s", at.Problem)
		}
		return at.Predicate, nil
	}
	return nil, ErrNoSBOM
}

// ErrNoSBOM is a seed that carries no SBOM attestation.
var ErrNoSBOM = errors.New("no SBOM attestation (a seed published with a signing key carries one)")
