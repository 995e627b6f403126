package depot

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snofactory/snofactory/pipeline/termsafe"
)

// WriteText prints one line per build and the totals; a build still running has run for
// as long as until now.
func (s *Summary) WriteText(w io.Writer, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tSTATUS\tATTEMPTS\tTIME\tFAILED STAGE\tOUTPUT")
	for _, b := range s.Builds {
		d := ""
		if !b.Started.IsZero() {
			end := b.Finished
			if end.IsZero() {
				end = now
			}
			d = end.Sub(b.Started).Round(time.Second).String()
		}
		// Every string here comes from depot.json: printed with control characters escaped.
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", termsafe.String(b.Name), termsafe.String(b.Status), b.Attempts, d,
			termsafe.String(b.FailedStage), termsafe.String(b.OutputDir))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Why a build failed or was cancelled: a PipelineRun's task and message say it here,
	// not in a log on this machine.
	for _, b := range s.Builds {
		if (b.Status == StatusFailed || b.Status == StatusCancelled) && b.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", termsafe.String(b.Name), termsafe.String(b.Error))
		}
	}
	counts, hits, misses := s.Counts()
	cancelled := ""
	if n := counts[StatusCancelled]; n > 0 {
		cancelled = fmt.Sprintf(", %d cancelled", n)
	}
	_, err := fmt.Fprintf(w, "depot %s: %d succeeded, %d failed%s, %d running, %d queued; stages: %d cache hits, %d runs\n",
		termsafe.String(s.Status), counts[StatusSucceeded], counts[StatusFailed], cancelled, counts[StatusRunning], counts[StatusQueued], hits, misses)
	return err
}

// Err is the verdict of a depot's status for scripts that poll it: an error for a depot
// that failed or whose process is gone, nil while it runs or once it succeeded.
func (s *Summary) Err() error {
	switch s.Status {
	case StatusFailed:
		return errors.New("depot: some builds failed")
	case StatusInterrupted:
		return errors.New("depot: interrupted (its process is gone); run it again to finish the remaining builds")
	}
	return nil
}

// NameBuilds makes a build of each blueprint path, named by names[path] (its
// metadata.name) or else by its file name, and made unique with a -2, -3... suffix.
func NameBuilds(paths []string, names map[string]string) []Build {
	seen := map[string]int{}
	var out []Build
	for _, p := range paths {
		name := names[p]
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		}
		seen[name]++
		if n := seen[name]; n > 1 {
			name = fmt.Sprintf("%s-%d", name, n)
		}
		out = append(out, Build{Name: name, Blueprint: p})
	}
	return out
}

// Finish prints a depot run's table and where its report is, and fails unless every
// build succeeded; err is the run's own.
func Finish(w io.Writer, sum *Summary, dir string, err error) error {
	if sum != nil {
		sum.WriteText(w, time.Now())
		fmt.Fprintf(w, "report: %s\n", filepath.Join(dir, HTMLFile))
	}
	if err != nil {
		return err
	}
	if sum.Status != StatusSucceeded {
		return errors.New("depot: some builds failed (see the report)")
	}
	return nil
}
