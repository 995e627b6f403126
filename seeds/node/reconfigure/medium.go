package reconfigure

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// ISO 9660: the primary volume descriptor is sector 16 (2048-byte sectors), type 1, with
// the standard identifier CD001 and the volume identifier at bytes 40-71.
const (
	isoSector    = 2048
	isoPVDOffset = 16 * isoSector
)

// hasSiteLabel reports whether the file or device at path is an ISO 9660 image labelled
// as a site medium (siteconfig.MediumLabels: ours or the image-based installer's).
// Anything unreadable (an empty CD-ROM drive) is not.
func hasSiteLabel(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	pvd := make([]byte, isoSector)
	if _, err := f.ReadAt(pvd, isoPVDOffset); err != nil {
		return false
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return false
	}
	return slices.Contains(siteconfig.MediumLabels(), string(bytes.TrimRight(pvd[40:72], " \x00")))
}

// candidates lists the paths to look at, in order, without duplicates (the label link
// and the device it points to are one medium).
func (r *run) candidates() []string {
	if r.o.Medium != "" {
		return []string{r.o.Medium}
	}
	var out []string
	seen := map[string]bool{}
	for _, g := range r.o.MediumGlobs {
		matches, _ := filepath.Glob(g) // only ErrBadPattern, and the globs are ours
		for _, m := range matches {
			real, err := filepath.EvalSymlinks(m)
			if err != nil || seen[real] {
				continue
			}
			seen[real] = true
			out = append(out, m)
		}
	}
	return out
}

// scan returns the first candidate labelled as a site medium that skip does not pass over.
func (r *run) scan(skip func(path string) bool) string {
	for _, c := range r.candidates() {
		if hasSiteLabel(c) && (skip == nil || !skip(c)) {
			return c
		}
	}
	return ""
}

// wait is one wait for a medium: since when (MediumTimeout counts from the hook's start),
// which media to pass over (those refused), and the last refusal, which the waiting lines
// and the timeout mention.
type wait struct {
	start   time.Time
	skip    func(path string) bool
	refused error
	want    string // what another medium must be, after a refusal
}

// findMedium polls for the medium until MediumTimeout, telling the console every
// StatusInterval that it waits and what for.
func (r *run) findMedium(ctx context.Context, w wait) (string, error) {
	var lastStatus time.Time
	for {
		if p := r.scan(w.skip); p != "" {
			return p, nil
		}
		now := r.o.Clock.Now()
		elapsed := now.Sub(w.start)
		if elapsed >= r.o.MediumTimeout {
			if w.refused != nil {
				return "", fmt.Errorf("no other site-config medium came within %s: nothing was applied; insert one %s and reboot. The one inserted was refused: %w",
					shortDuration(r.o.MediumTimeout), w.want, w.refused)
			}
			return "", fmt.Errorf("no site-config medium (volume label %s) after %s, looked at %s: nothing was applied; "+
				"write one with snofactory site-config create, attach it and reboot",
				siteconfig.VolumeLabel, shortDuration(r.o.MediumTimeout), strings.Join(r.lookedAt(), ", "))
		}
		if lastStatus.IsZero() || now.Sub(lastStatus) >= r.o.StatusInterval {
			if w.refused != nil {
				r.say("waiting for a site-config medium %s (label %s), the one inserted was refused: replace it; %s of %s",
					w.want, siteconfig.VolumeLabel, shortDuration(elapsed), shortDuration(r.o.MediumTimeout))
			} else {
				r.say("waiting for the site-config medium (label %s): insert it or see %s; %s of %s",
					siteconfig.VolumeLabel, MediumHelp, shortDuration(elapsed), shortDuration(r.o.MediumTimeout))
			}
			lastStatus = now
		}
		if err := r.o.Clock.Sleep(ctx, min(r.o.PollInterval, r.o.MediumTimeout-elapsed)); err != nil {
			return "", fmt.Errorf("waiting for the site-config medium: %w", err)
		}
	}
}

func (r *run) lookedAt() []string {
	if r.o.Medium != "" {
		return []string{r.o.Medium}
	}
	return r.o.MediumGlobs
}

// shortDuration prints whole seconds without zero units: 40s, 10m, 1m30s, 1h.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
