package resolve

import (
	"fmt"
	"io"
	"text/tabwriter"

	units "github.com/docker/go-units"
)

// WriteText describes the release for a person, one aligned "Field: value" line each.
func (i *Info) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Release:\t%s\n", i.Ref)
	fmt.Fprintf(tw, "Digest:\t%s\n", i.Digest)
	fmt.Fprintf(tw, "Version:\t%s\n", i.Version)
	fmt.Fprintf(tw, "Components:\t%d\n", i.Components)
	fmt.Fprintf(tw, "Unique blobs:\t%d (%s)\n", i.UniqueBlobs, exactBytes(i.UniqueBlobBytes))
	fmt.Fprintf(tw, "Blobs per image, summed:\t%s\n", exactBytes(i.TotalBlobBytes))
	if i.ISO != nil {
		fmt.Fprintf(tw, "Live ISO (%s):\t%s\n", i.Arch, i.ISO.URL)
	}
	if i.Installer != "" {
		fmt.Fprintf(tw, "Installer:\t%s\n", i.Installer)
	}
	return tw.Flush()
}

// exactBytes is a byte count in binary units, and exactly.
func exactBytes(n int64) string {
	return fmt.Sprintf("%s (%d bytes)", units.BytesSize(float64(n)), n)
}
