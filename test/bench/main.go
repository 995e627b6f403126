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
	flag.Parse()

	benchmarks := []benchmark{
		// --- benchmarks ---
		{"iso", benchISO},
		{"precache", benchPrecache},
		{"install", benchInstall},
		{"publish", benchPublish},
		{"factory", benchFactory},
		{"depot", benchDepot},
		{"reproducible", benchReproducible},
		// --- end benchmarks ---
	}
	failed := false
	for _, b := range benchmarks {
		if *only != "" && !strings.Contains(b.name, *only) {
			continue
		}
		dir, err := os.MkdirTemp("", "snofactory-bench-"+b.name+"-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		results, err := b.run(ctx, dir)
		os.RemoveAll(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", b.name, err)
			failed = true
			continue
		}
		for _, r := range results {
			fmt.Println(format(r))
		}
	}
	if failed {
		os.Exit(1)
	}
}

func format(r Result) string {
	ratio := "inf"
	if r.Baseline != 0 {
		ratio = fmt.Sprintf("%.4f", r.Ours/r.Baseline)
	}
	line := fmt.Sprintf("BENCH %s ours=%.4g%s baseline=%.4g%s ratio=%s", r.Name, r.Ours, r.Unit, r.Baseline, r.Unit, ratio)
	if r.Target != "" {
		line += " target=" + strings.ReplaceAll(r.Target, " ", "")
	}
	if ok, known := met(r); known && !ok {
		line += " MISSED"
	}
	if r.Note != "" {
		line += fmt.Sprintf(" note=%q", r.Note)
	}
	return line
}

// met evaluates a target of the form "ratio|ours OP NUMBER ..." (OP one of <, <=, =, >=,
// >); known is false for a target it cannot read.
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
		if r.Baseline == 0 {
			return false, false
		}
		v = r.Ours / r.Baseline
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
