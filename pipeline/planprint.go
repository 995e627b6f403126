package pipeline

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WritePlan prints a plan as a table, one line per stage: its short key, what a build
// would do with it, its session and why.
func WritePlan(w io.Writer, plan []PlannedStage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tKEY\tACTION\tSESSION\tWHY")
	for _, s := range plan {
		key := s.Key
		switch {
		case len(key) > 12:
			key = key[:12]
		case key == "":
			key = "-" // chains on outputs of a stage that has not run yet
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, key, s.Action, cmp.Or(s.Session, "-"), strings.Join(s.Reasons, "; "))
	}
	return tw.Flush()
}
