package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	got := format(Result{Name: "iso-embed-inplace", Unit: "s", Ours: 0.002, Baseline: 0.5, Target: "ratio < 0.01"})
	want := "BENCH iso-embed-inplace ours=0.002s baseline=0.5s ratio=0.0040 target=ratio<0.01 MET"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// The push's blobs per seed and the registry's time per blob stand beside its ratio.
	got = format(Result{Name: "seed-push-vs-skopeo-copy", Unit: "s", Ours: 8, Baseline: 10, Target: "ratio <= 0.8",
		Beside: []string{"blobs_per_seed=1467", "registry_ms_per_blob=5.5"}})
	want = "BENCH seed-push-vs-skopeo-copy ours=8s baseline=10s ratio=0.8000 blobs_per_seed=1467 registry_ms_per_blob=5.5 target=ratio<=0.8 MET"
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

// A figure of several rounds is decided on the median of the rounds' ratios, whatever one
// noisy round says, and shows their spread.
func TestCombineDecidesOnTheMedian(t *testing.T) {
	round := func(name string, ours, base float64, note string) []Result {
		return []Result{{Name: name, Unit: "s", Ours: ours, Baseline: base, Target: "ratio <= 0.8", Note: note}}
	}
	for _, tc := range []struct {
		name       string
		rounds     [][]Result
		wantRatio  float64
		lo, hi     float64
		ours, base float64
		note, line string
	}{{
		name:      "one slow round does not invent a miss",
		rounds:    [][]Result{round("push", 7, 10, "a"), round("push", 30, 15, "b"), round("push", 15, 20, "c")},
		wantRatio: 0.75, lo: 0.7, hi: 2, ours: 15, base: 15, note: "c",
		line: `BENCH push ours=15s baseline=15s ratio=0.7500 spread=0.7000-2.0000 runs=3 target=ratio<=0.8 MET note="c"`,
	}, {
		name:      "one lucky round does not hide a miss",
		rounds:    [][]Result{round("push", 9, 10, "a"), round("push", 5, 10, "b"), round("push", 10, 10, "c")},
		wantRatio: 0.9, lo: 0.5, hi: 1, ours: 9, base: 10, note: "a",
		line: `BENCH push ours=9s baseline=10s ratio=0.9000 spread=0.5000-1.0000 runs=3 target=ratio<=0.8 MISSED note="a"`,
	}, {
		name:      "an even count takes the mean of the middle two",
		rounds:    [][]Result{round("push", 6, 10, ""), round("push", 10, 10, "")},
		wantRatio: 0.8, lo: 0.6, hi: 1, ours: 8, base: 10,
		line: `BENCH push ours=8s baseline=10s ratio=0.8000 spread=0.6000-1.0000 runs=2 target=ratio<=0.8 MET`,
	}, {
		name:      "a round with no baseline has no ratio",
		rounds:    [][]Result{round("push", 6, 0, ""), round("push", 7, 10, "")},
		wantRatio: 0.7, lo: 0.7, hi: 0.7, ours: 6.5, base: 5,
		line: `BENCH push ours=6.5s baseline=5s ratio=0.7000 spread=0.7000-0.7000 runs=1 target=ratio<=0.8 MET`,
	}, {
		name:   "one round is that round",
		rounds: [][]Result{round("push", 9, 10, "x")}, wantRatio: 0.9, lo: 0.9, hi: 0.9, ours: 9, base: 10, note: "x",
		line: `BENCH push ours=9s baseline=10s ratio=0.9000 spread=0.9000-0.9000 runs=1 target=ratio<=0.8 MISSED note="x"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := combine(tc.rounds)
			if len(got) != 1 {
				t.Fatalf("%d figures, want 1", len(got))
			}
			r := got[0]
			ratio, _ := r.ratio()
			lo, hi := spread(r.Ratios)
			for _, c := range []struct {
				what      string
				got, want float64
			}{{"ratio", ratio, tc.wantRatio}, {"spread low", lo, tc.lo}, {"spread high", hi, tc.hi}, {"ours", r.Ours, tc.ours}, {"baseline", r.Baseline, tc.base}} {
				if math.Abs(c.got-c.want) > 1e-9 {
					t.Errorf("%s %g, want %g", c.what, c.got, c.want)
				}
			}
			if r.Note != tc.note {
				t.Errorf("note %q, want %q", r.Note, tc.note)
			}
			if line := format(r); line != tc.line {
				t.Errorf("line\n got  %s\n want %s", line, tc.line)
			}
		})
	}
}

// Figures keep the order of the first round, and an "ours" target is decided on the median
// ours.
func TestCombineKeepsOrderAndMediansOurs(t *testing.T) {
	rounds := [][]Result{
		{{Name: "rss", Ours: 300, Baseline: 256, Target: "ours <= 256 MiB"}, {Name: "size", Ours: 1, Baseline: 1}},
		{{Name: "rss", Ours: 100, Baseline: 256, Target: "ours <= 256 MiB"}, {Name: "size", Ours: 1, Baseline: 1}},
		{{Name: "rss", Ours: 120, Baseline: 256, Target: "ours <= 256 MiB"}, {Name: "size", Ours: 1, Baseline: 1}},
	}
	got := combine(rounds)
	if len(got) != 2 || got[0].Name != "rss" || got[1].Name != "size" {
		t.Fatalf("figures %+v, want rss then size", got)
	}
	if got[0].Ours != 120 {
		t.Errorf("ours %g, want the median 120", got[0].Ours)
	}
	if ok, known := met(got[0]); !ok || !known {
		t.Errorf("median 120 MiB against <= 256: met %v known %v", ok, known)
	}
}

func TestMedianValue(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{5, 5, 1}, 5}} {
		in := append([]float64(nil), tc.vs...)
		if got := medianValue(tc.vs); got != tc.want {
			t.Errorf("median of %v = %g, want %g", tc.vs, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.vs[i] {
				t.Errorf("median reordered its input %v to %v", in, tc.vs)
			}
		}
	}
}

// One factory VM is judged by what it saves per boot it avoids, against a bare boot; a
// build that avoids no boot saves nothing and misses.
func TestSavedPerBoot(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		ours, base       time.Duration
		oursBoots, boots int
		bare             time.Duration
		perBoot          float64
		missed           bool
	}{
		{44 * s, 59 * s, 2, 4, 10 * s, 7.5, false},
		{57 * s, 59 * s, 2, 4, 10 * s, 1, true},
		{44 * s, 59 * s, 4, 4, 10 * s, 0, true},
	} {
		r := savedPerBoot(tc.ours, tc.base, tc.oursBoots, tc.boots, tc.bare)
		ok, known := met(r)
		if r.Ours != tc.perBoot || !known || ok == tc.missed {
			t.Errorf("%v vs %v, %d vs %d boots: %.2f s per boot, met %v; want %.2f, missed %v",
				tc.ours, tc.base, tc.oursBoots, tc.boots, r.Ours, ok, tc.perBoot, tc.missed)
		}
	}
}

// A figure the host cannot measure says so and why, through combine's rounds too, and
// never reads as a measured ratio or a target met or missed.
func TestSkippedLine(t *testing.T) {
	r := Result{Name: tektonLine, Skipped: "a real cluster needs root"}
	want := `BENCH ` + tektonLine + ` SKIPPED reason="a real cluster needs root"`
	for _, got := range []string{format(r), format(combine([][]Result{{r}, {r}})[0])} {
		if got != want {
			t.Errorf("format = %q, want %q", got, want)
		}
	}
}
