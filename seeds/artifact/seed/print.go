package seed

import (
	"fmt"
	"io"
	"strings"

	units "github.com/docker/go-units"
)

// WriteFields describes the seed for a person, one "Field:\tvalue" line each, for a
// tabwriter that aligns them with what the caller adds (seed inspect adds signatures).
func (m *Manifest) WriteFields(w io.Writer) {
	fmt.Fprintf(w, "Name:\t%s\n", m.Name)
	fmt.Fprintf(w, "Target:\t%s %s\n", m.Target, m.ReleaseVersion)
	fmt.Fprintf(w, "Firmware:\t%s\n", m.Firmware)
	fmt.Fprintf(w, "Created:\t%s\n", m.Created.UTC().Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(w, "Blueprint:\t%s\n", m.BlueprintDigest)
	fmt.Fprintf(w, "Lock:\t%s\n", m.LockDigest)
	fmt.Fprintf(w, "Reconfiguration API:\t%s\n", m.ReconfigurationAPIVersion)
	fmt.Fprintf(w, "Validation:\t%d passed, %d failed, %d skipped, %d warnings\n",
		m.Validation.Passed, m.Validation.Failed, m.Validation.Skipped, m.Validation.Warnings)
	fmt.Fprintf(w, "Images:\t%d\n", len(m.Images))
	for _, d := range m.Disks {
		fmt.Fprintf(w, "Disk %s:\t%s, %s stored, %s raw, raw digest %s\n", d.Format, d.File,
			units.BytesSize(float64(d.Size)), units.BytesSize(float64(d.VirtualSize)), d.RawDigest)
	}
	if c := m.Credentials; c != nil {
		fmt.Fprintf(w, "Credentials:\t%s, for %s\n", c.File, strings.Join(c.Recipients, ", "))
	}
}
