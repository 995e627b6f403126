package steps

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
)

// Step is one thing a sequence does to a node.
type Step struct {
	// Name identifies the step in reports and progress records.
	Name string `json:"name"`
	// Argv is the command the step runs, when it runs one.
	Argv []string `json:"argv,omitempty"`
	// Changes are what the step writes or removes. An entry starting with "/" is a node
	// path: ending in "/" it stands for everything under that directory (the directory
	// kept), otherwise for that file or directory with everything under it; "*" matches
	// within one path element as in path.Match, "**" any number of them. Any other entry is
	// an API object, KIND NAMESPACE/NAME or KIND NAME, which may hold "*" the same way.
	Changes []string `json:"changes,omitempty"`
	// Detail says in a few words what the step is for.
	Detail string `json:"detail,omitempty"`
}

// Print writes a plan as JSON (format "json") or as one readable block per step.
func Print(w io.Writer, plan []Step, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if plan == nil {
			plan = []Step{}
		}
		return enc.Encode(plan)
	case "", "text":
		for i, s := range plan {
			if _, err := fmt.Fprintf(w, "%2d. %s", i+1, s.Name); err != nil {
				return err
			}
			if s.Detail != "" {
				fmt.Fprintf(w, ": %s", s.Detail)
			}
			fmt.Fprintln(w)
			if len(s.Argv) > 0 {
				fmt.Fprintf(w, "      run:     %s\n", strings.Join(s.Argv, " "))
			}
			for _, c := range s.Changes {
				fmt.Fprintf(w, "      changes: %s\n", c)
			}
		}
		return nil
	default:
		return fmt.Errorf("output format %q: want text or json", format)
	}
}

// Names lists the steps' names in order.
func Names(plan []Step) []string {
	out := make([]string, len(plan))
	for i, s := range plan {
		out[i] = s.Name
	}
	return out
}

// Covers says whether a Changes entry that is a node path (a file, a directory ending in
// "/" or not, or a glob like /etc/ssh/ssh_host_*) reaches the node path p: p is the entry,
// lies under it, or matches it.
func Covers(change, p string) bool {
	if change == p || strings.HasPrefix(p, strings.TrimSuffix(change, "/")+"/") {
		return true
	}
	ok, err := path.Match(change, p)
	return err == nil && ok
}
