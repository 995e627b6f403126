package pipeline

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/snofactory/snofactory/pipeline/termsafe"
)

// WritePlan prints a plan as a table, one line per stage: its short key, what a build
// would do with it, its session and why. Keys, sessions and reasons come partly from the
// cache's records and the blueprint: control characters are escaped.
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
		q := termsafe.String
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", q(s.Name), q(key), q(string(s.Action)), q(cmp.Or(s.Session, "-")), termsafe.Text(strings.Join(s.Reasons, "; ")))
	}
	return tw.Flush()
}
