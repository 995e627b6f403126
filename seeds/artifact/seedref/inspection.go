package seedref

import (
	"io"
	"text/tabwriter"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// Inspection is what seed inspect shows of a seed: its manifest and, for a seed in a
// registry, what is attached to it. Its JSON form is seed inspect -o json's.
type Inspection struct {
	Digest       digest.Digest           `json:"digest,omitempty"`
	Seed         *seed.Manifest          `json:"seed"`
	Signatures   []trust.SignatureInfo   `json:"signatures"`
	Attestations []trust.AttestationInfo `json:"attestations"`

	attached *trust.Attached
}

// NewInspection describes m and what is attached to it (nil: nothing, a seed not in a
// registry); the lists are empty rather than null in JSON.
func NewInspection(m *seed.Manifest, attached *trust.Attached) Inspection {
	in := Inspection{Seed: m, Signatures: []trust.SignatureInfo{}, Attestations: []trust.AttestationInfo{}, attached: attached}
	if attached != nil {
		in.Digest, in.Signatures, in.Attestations = attached.Digest, attached.Signatures, attached.Attestations
	}
	return in
}

// WriteText describes the seed for a person, its fields aligned, then what is attached to
// it; checked says keys were given to verify the attachments.
func (in Inspection) WriteText(w io.Writer, checked bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	in.Seed.WriteFields(tw)
	if in.attached != nil {
		in.attached.WriteFields(tw, checked)
	}
	return tw.Flush()
}
