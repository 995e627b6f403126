package diskpack

import (
	"fmt"
	"io"

	units "github.com/docker/go-units"
)

// WriteText says, for a person, how much of seed b seed a already holds (d is
// Compare(a's index, b's)): chunks, raw and stored bytes, and what moving b to where a is
// sends: a pull or a write --from fetches the chunks it lacks, a push whole groups.
func (d Diff) WriteText(w io.Writer, a, b string) error {
	size := func(n int64) string { return units.BytesSize(float64(n)) }
	fmt.Fprintf(w, "%s shares with %s:\n", b, a)
	fmt.Fprintf(w, "  chunks: %d of %d (%.1f%%)\n", d.SharedChunks, d.Chunks, percent(int64(d.SharedChunks), int64(d.Chunks)))
	fmt.Fprintf(w, "  raw bytes: %s of %s (%.1f%%)\n", size(d.SharedBytes), size(d.Bytes), percent(d.SharedBytes, d.Bytes))
	fmt.Fprintf(w, "  stored bytes: %s of %s (%.1f%%); moving %s where %s is sends %s\n", size(d.SharedStored),
		size(d.Stored), percent(d.SharedStored, d.Stored), b, a, size(d.Stored-d.SharedStored))
	_, err := fmt.Fprintf(w, "  chunk groups: %d of %d (%.1f%%); pushing %s after %s sends %s\n", d.SharedGroups, d.Groups,
		percent(int64(d.SharedGroups), int64(d.Groups)), b, a, size(d.PushStored))
	return err
}

// percent is part of whole in percent; all of nothing is 100%.
func percent(part, whole int64) float64 {
	if whole == 0 {
		return 100
	}
	return 100 * float64(part) / float64(whole)
}
