package main

import "testing"

func TestFormat(t *testing.T) {
	got := format(Result{Name: "iso-embed-inplace", Unit: "s", Ours: 0.002, Baseline: 0.5, Target: "ratio < 0.01"})
	want := "BENCH iso-embed-inplace ours=0.002s baseline=0.5s ratio=0.0040 target=ratio<0.01"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
