package main

import (
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	got := format(Result{Name: "iso-embed-inplace", Unit: "s", Ours: 0.002, Baseline: 0.5, Target: "ratio < 0.01"})
	want := "BENCH iso-embed-inplace ours=0.002s baseline=0.5s ratio=0.0040 target=ratio<0.01"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// A figure that misses its target says so on its line; one the evaluator cannot read is
// left unmarked.
func TestMissedTargets(t *testing.T) {
	for _, tc := range []struct {
		r      Result
		missed bool
	}{
		{Result{Ours: 1, Baseline: 2, Target: "ratio <= 0.5"}, false},
		{Result{Ours: 1.1, Baseline: 2, Target: "ratio <= 0.5"}, true},
		{Result{Ours: 1, Baseline: 100, Target: "ratio < 0.01"}, true},
		{Result{Ours: 300, Baseline: 256, Target: "ours <= 256 MiB (baseline is the bound)"}, true},
		{Result{Ours: 2, Baseline: 4, Target: "ours = 2 (live ISO, installed disk)"}, false},
		{Result{Ours: 59, Baseline: 10, Target: "ours < 60 s"}, false},
		{Result{Ours: 96, Baseline: 100, Target: "ratio >= 0.95"}, false},
		{Result{Ours: 94, Baseline: 100, Target: "ratio >= 0.95"}, true},
		{Result{Ours: 0, Baseline: 9, Target: "ours > 0"}, true},
		{Result{Ours: 5, Baseline: 0, Target: "ratio <= 0.5"}, false},
		{Result{Ours: 5, Baseline: 1, Target: "as fast as possible"}, false},
	} {
		if got := strings.HasSuffix(format(tc.r), " MISSED"); got != tc.missed {
			t.Errorf("%+v: marked missed %v, want %v", tc.r, got, tc.missed)
		}
	}
}
