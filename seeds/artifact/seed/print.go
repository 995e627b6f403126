package seed

import (
	"fmt"
	"io"
	"strings"

	units "github.com/docker/go-units"

	"github.com/snofactory/snofactory/pipeline/termsafe"
)

// WriteFields describes the seed for a person, one "Field:\tvalue" line each, for a
// tabwriter that aligns them with what the caller adds (seed inspect adds signatures).
// Every string comes from seed.json, which anyone can write: each is printed with its
// control characters escaped (termsafe), so it cannot drive the terminal or forge a line.
func (m *Manifest) WriteFields(w io.Writer) {
	q := termsafe.String
	fmt.Fprintf(w, "Name:\t%s\n", q(m.Name))
	fmt.Fprintf(w, "Target:\t%s %s\n", q(string(m.Target)), q(m.ReleaseVersion))
	fmt.Fprintf(w, "Firmware:\t%s\n", q(m.Firmware))
	fmt.Fprintf(w, "Created:\t%s\n", m.Created.UTC().Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(w, "Blueprint:\t%s\n", q(m.BlueprintDigest.String()))
	fmt.Fprintf(w, "Lock:\t%s\n", q(m.LockDigest.String()))
	fmt.Fprintf(w, "Reconfiguration API:\t%s\n", q(m.ReconfigurationAPIVersion))
	fmt.Fprintf(w, "Validation:\t%d passed, %d failed, %d skipped, %d warnings\n",
		m.Validation.Passed, m.Validation.Failed, m.Validation.Skipped, m.Validation.Warnings)
	fmt.Fprintf(w, "Images:\t%d\n", len(m.Images))
	if m.SiteFit != nil {
		// What a site must match (seeds/site/fit), so a depot sees it before it writes.
		fmt.Fprintf(w, "Site fit:\t%s\n", q(m.SiteFit.Summary()))
	}
	for _, d := range m.Disks {
		fmt.Fprintf(w, "Disk %s:\t%s, %s stored, %s raw, raw digest %s\n", q(d.Format), q(d.File),
			units.BytesSize(float64(d.Size)), units.BytesSize(float64(d.VirtualSize)), q(d.RawDigest.String()))
	}
	if c := m.Credentials; c != nil {
		recipients := make([]string, len(c.Recipients))
		for i, r := range c.Recipients {
			recipients[i] = q(r)
		}
		fmt.Fprintf(w, "Credentials:\t%s, for %s\n", q(c.File), strings.Join(recipients, ", "))
	}
}
