package main

// Result is one measured figure: ours and the baseline, measured in the same run.
type Result struct {
	Name     string
	Unit     string
	Ours     float64
	Baseline float64
	// Target says what the figure must reach, e.g. "ratio < 0.01"; printed for the reader.
	Target string
	// Note says where the time goes, for a figure that misses its target.
	Note string
}
