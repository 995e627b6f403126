// Command bench measures snofactory's figures against baselines run on the same machine in
// the same run, and prints one line per figure:
//
//	BENCH <name> ours=<value><unit> baseline=<value><unit> ratio=<ours/baseline> spread=<lo>-<hi> runs=<n> target=<target> MET|MISSED
//
// so figures can be compared over time: each benchmark runs -count rounds, and a line
// gives the medians and the spread of the rounds' ratios. Run it with `make bench`.
package main
