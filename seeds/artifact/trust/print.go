package trust

import (
	"fmt"
	"io"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/snofactory/snofactory/pipeline/termsafe"
)

// WriteFields lists the seed's signatures and attestations, one "Field:\tvalue" line each
// (for a tabwriter), each with the key that verified it or the reason it does not verify.
// checked says keys were given. Identities, creators, predicate types and problems come
// from the registry's signatures and annotations: printed with control characters escaped.
func (a *Attached) WriteFields(w io.Writer, checked bool) {
	q := termsafe.String
	fmt.Fprintf(w, "Digest:\t%s\n", q(a.Digest.String()))
	status := func(verifiedBy, problem string) string {
		switch {
		case problem != "":
			return "NOT VERIFIED: " + termsafe.Text(problem)
		case verifiedBy != "":
			return "verified by key " + verifiedBy
		case !checked:
			return "not checked (give --key PREFIX.pub)"
		}
		return ""
	}
	if len(a.Signatures) == 0 {
		fmt.Fprintf(w, "Signatures:\tnone\n")
	}
	for _, s := range a.Signatures {
		fmt.Fprintf(w, "Signature:\t%s, by %s at %s: %s\n", q(s.Identity), q(s.Creator), s.Signed.Format(time.RFC3339), status(s.VerifiedBy, s.Problem))
	}
	if len(a.Attestations) == 0 {
		fmt.Fprintf(w, "Attestations:\tnone\n")
	}
	for _, at := range a.Attestations {
		fmt.Fprintf(w, "Attestation:\t%s, %s: %s\n", q(at.PredicateType), units.BytesSize(float64(at.Size)), status(at.VerifiedBy, at.Problem))
	}
}

// Untrusted is the verdict on the seed at ref when keys were given (checked): nil when it
// carries a signature one of them verifies and every attestation verifies, else why not.
// Nothing attached to check (a seed not in a registry), or nothing checked, is nil.
func (a *Attached) Untrusted(ref string, checked bool) error {
	if !checked || a == nil {
		return nil
	}
	problems := a.Problems()
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s is not trusted: %s", ref, strings.Join(problems, "; "))
}
