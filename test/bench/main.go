package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

type benchmark struct {
	name string
	run  func(ctx context.Context, dir string) ([]Result, error)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) == 4 && os.Args[1] == packChild {
		debug.SetMemoryLimit(diskpack.HeapLimit) // as snofactory does
		if err := runPackChild(ctx, os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	only := flag.String("only", "", "run only benchmarks whose name contains this")
	count := flag.Int("count", 3, "rounds of each benchmark: ours and its baseline run together in each, and each line "+
		"prints the rounds' median ratio and its spread (1 for a quick run)")
	diskGiB := flag.Int64("disk-gib", bigDiskGiB, "size of the publish bench's disk in GiB, its data scaled with it (a quick run: 2)")
	jobs := flag.Int("jobs", 0, "blobs the publish bench's push and pull move at once (their --jobs; 0: the default)")
	flag.Parse()
	if *count < 1 || *diskGiB < 1 || *jobs < 0 {
		fmt.Fprintln(os.Stderr, "-count and -disk-gib must be at least 1, -jobs at least 0")
		os.Exit(2)
	}

	benchmarks := []benchmark{
		// --- benchmarks ---
		{"iso", benchISO},
		{"precache", benchPrecache},
		{"install", benchInstall},
		{"publish", func(ctx context.Context, dir string) ([]Result, error) {
			return benchPublish(ctx, dir, *diskGiB, *jobs)
		}},
		{"factory", benchFactory},
		{"depot", benchDepot},
		{"reproducible", benchReproducible},
		{"tekton", benchTekton},
		// --- end benchmarks ---
	}
	failed := false
	for _, b := range benchmarks {
		if *only != "" && !strings.Contains(b.name, *only) {
			continue
		}
		rounds, err := runRounds(ctx, b, *count)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", b.name, err)
			failed = true
			continue
		}
		for _, r := range combine(rounds) {
			fmt.Println(format(r))
		}
	}
	if failed {
		os.Exit(1)
	}
}

// runRounds runs b n times, each round in a fresh directory, and returns each round's
// figures. Ours and the baseline run one after the other within a round, so the rounds
// interleave them: load that comes and goes falls on both.
func runRounds(ctx context.Context, b benchmark, n int) ([][]Result, error) {
	var rounds [][]Result
	for i := range n {
		if n > 1 {
			fmt.Fprintf(os.Stderr, "bench %s: round %d of %d\n", b.name, i+1, n)
		}
		dir, err := os.MkdirTemp("", "snofactory-bench-"+b.name+"-")
		if err != nil {
			return nil, err
		}
		results, err := b.run(ctx, dir)
		os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i+1, err)
		}
		rounds = append(rounds, results)
	}
	return rounds, nil
}

func format(r Result) string {
	if r.Skipped != "" {
		return fmt.Sprintf("BENCH %s SKIPPED reason=%q", r.Name, r.Skipped)
	}
	ratio := "inf"
	if v, ok := r.ratio(); ok {
		ratio = fmt.Sprintf("%.4f", v)
	}
	line := fmt.Sprintf("BENCH %s ours=%.4g%s baseline=%.4g%s ratio=%s", r.Name, r.Ours, r.Unit, r.Baseline, r.Unit, ratio)
	if len(r.Ratios) > 0 {
		lo, hi := spread(r.Ratios)
		line += fmt.Sprintf(" spread=%.4f-%.4f runs=%d", lo, hi, len(r.Ratios))
	}
	for _, b := range r.Beside {
		line += " " + b
	}
	if r.Target != "" {
		line += " target=" + strings.ReplaceAll(r.Target, " ", "")
	}
	if ok, known := met(r); known {
		line += map[bool]string{true: " MET", false: " MISSED"}[ok]
	}
	if r.Note != "" {
		line += fmt.Sprintf(" note=%q", r.Note)
	}
	return line
}

// met evaluates a target of the form "ratio|ours OP NUMBER ..." (OP one of <, <=, =, >=,
// >) on the figure's median ratio, or its median ours; known is false for a target it
// cannot read.
func met(r Result) (ok, known bool) {
	f := strings.Fields(r.Target)
	if len(f) < 3 {
		return false, false
	}
	bound, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		return false, false
	}
	var v float64
	switch f[0] {
	case "ratio":
		if v, known = r.ratio(); !known {
			return false, false
		}
	case "ours":
		v = r.Ours
	default:
		return false, false
	}
	switch f[1] {
	case "<":
		return v < bound, true
	case "<=":
		return v <= bound, true
	case "=":
		return v == bound, true
	case ">=":
		return v >= bound, true
	case ">":
		return v > bound, true
	}
	return false, false
}
