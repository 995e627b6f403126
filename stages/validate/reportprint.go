package validate

import (
	"fmt"
	"io"
)

// WriteText prints one line per check and the totals.
func (r *Report) WriteText(w io.Writer) error {
	for _, res := range r.Results {
		fmt.Fprintln(w, res.Line())
	}
	_, err := fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped)
	return err
}
