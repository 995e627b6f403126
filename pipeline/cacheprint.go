package pipeline

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"

	"github.com/snofactory/snofactory/pipeline/termsafe"
)

// WriteItems prints items as a table, one line per item, for people: keys are shortened
// (the JSON form has them whole) and each last use says how long ago it was at now. Stage
// names and keys come from the cache's records on disk: control characters are escaped.
func WriteItems(w io.Writer, items []CacheItem, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tSTAGE\tKEY\tSIZE\tLAST USED\tIN USE")
	for _, it := range items {
		stage, inUse := it.Stage, "no"
		if stage == "" {
			stage = "-"
		}
		if it.InUse {
			inUse = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(it.Store), termsafe.String(stage), termsafe.String(shortKey(it.Key)), units.BytesSize(float64(it.Size)), usedAgo(now, it.LastUsed), inUse)
	}
	return tw.Flush()
}

// WriteText prints one line per store and the total of the items items.
func (u Usage) WriteText(w io.Writer, items int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tITEMS\tSIZE")
	for _, s := range u.Stores {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", termsafe.String(s.Store), s.Items, units.BytesSize(float64(s.Bytes)))
	}
	fmt.Fprintf(tw, "total\t%d\t%s\n", items, exactBytes(u.Total))
	return tw.Flush()
}

// WriteText prints what a prune removed (or would remove), what it skipped because a
// build took it meanwhile, and the space freed.
func (r PruneResult) WriteText(w io.Writer) {
	verb, freed, uses := "removed", "freed", "uses"
	if r.DryRun {
		verb, freed, uses = "would remove", "would free", "would use"
	}
	for _, it := range r.Removed {
		fmt.Fprintf(w, "%s %s\n", verb, it.Describe())
	}
	for _, it := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: a build started using it\n", it.Describe())
	}
	fmt.Fprintf(w, "%s %s in %d items; the cache %s %s\n", freed, exactBytes(r.Freed), len(r.Removed), uses, units.BytesSize(float64(r.After)))
}

// Describe names the item for a person: its stage or store, its short key, its size and
// its last use. The names come from the cache's records: control characters are escaped.
func (it CacheItem) Describe() string {
	what := termsafe.String(it.Store) + " " + termsafe.String(shortKey(it.Key))
	if it.Stage != "" {
		what = "stage " + termsafe.String(it.Stage) + " entry " + termsafe.String(shortKey(it.Key))
	}
	return fmt.Sprintf("%s (%s, last used %s)", what, units.BytesSize(float64(it.Size)), it.LastUsed.Format(time.RFC3339))
}

// shortKey keeps keys readable in a table: the algorithm and 12 hex digits.
func shortKey(k string) string {
	algo, hex, ok := strings.Cut(k, ":")
	if !ok {
		algo, hex = "", k
	} else {
		algo += ":"
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return algo + hex
}

func usedAgo(now, t time.Time) string {
	return t.Local().Format("2006-01-02 15:04") + " (" + now.Sub(t).Round(time.Minute).String() + " ago)"
}

// exactBytes is a size in binary units, and exactly.
func exactBytes(n int64) string {
	return fmt.Sprintf("%s (%d bytes)", units.BytesSize(float64(n)), n)
}
