package main

import (
	"math"
	"slices"
)

// Result is one measured figure: ours and the baseline, measured in the same run.
type Result struct {
	Name     string
	Unit     string
	Ours     float64
	Baseline float64
	// Target says what the figure must reach, e.g. "ratio < 0.01"; printed for the reader.
	Target string
	// Beside are figures printed beside the ratio, each as key=value (the push's blobs
	// per seed and the registry's time per blob).
	Beside []string
	// Note says where the time goes, for a figure that misses its target.
	Note string
	// Skipped says why the figure could not be measured on this host (a missing
	// prerequisite); the line then says SKIPPED and nothing else.
	Skipped string
	// Ratios are ours/baseline of each round, when combine made the figure from several
	// (Ours and Baseline are then the rounds' medians).
	Ratios []float64
}

// ratio is the figure's ratio: the median of its rounds', or ours/baseline; known is false
// when no round had a baseline to divide by.
func (r Result) ratio() (v float64, known bool) {
	if len(r.Ratios) > 0 {
		return medianValue(r.Ratios), true
	}
	if r.Baseline == 0 {
		return 0, false
	}
	return r.Ours / r.Baseline, true
}

// combine makes one figure of each name out of the rounds' (ours and its baseline ran
// together in each round): ours and the baseline are the medians, Ratios each round's
// ratio, and the note the one of the round whose ratio is nearest the median. A noisy
// round then neither hides nor invents a miss.
func combine(rounds [][]Result) []Result {
	var names []string
	byName := map[string][]Result{}
	for _, round := range rounds {
		for _, r := range round {
			if _, seen := byName[r.Name]; !seen {
				names = append(names, r.Name)
			}
			byName[r.Name] = append(byName[r.Name], r)
		}
	}
	out := make([]Result, 0, len(names))
	for _, name := range names {
		rs := byName[name]
		c := rs[0]
		var ours, base []float64
		for _, r := range rs {
			ours, base = append(ours, r.Ours), append(base, r.Baseline)
			if r.Baseline != 0 {
				c.Ratios = append(c.Ratios, r.Ours/r.Baseline)
			}
		}
		c.Ours, c.Baseline = medianValue(ours), medianValue(base)
		c.Note = nearestNote(rs, c.Ratios)
		out = append(out, c)
	}
	return out
}

// nearestNote is the note of the round whose ratio is nearest the rounds' median, or the
// first round's when none had a ratio.
func nearestNote(rs []Result, ratios []float64) string {
	if len(ratios) == 0 {
		return rs[0].Note
	}
	m := medianValue(ratios)
	best, note := math.Inf(1), rs[0].Note
	for _, r := range rs {
		if r.Baseline == 0 {
			continue
		}
		if d := math.Abs(r.Ours/r.Baseline - m); d < best {
			best, note = d, r.Note
		}
	}
	return note
}

// medianValue is the middle of vs (the mean of the two middle values for an even count); 0 for
// none.
func medianValue(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is the smallest and largest of vs.
func spread(vs []float64) (lo, hi float64) {
	return slices.Min(vs), slices.Max(vs)
}
