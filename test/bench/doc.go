// Command bench measures snofactory's figures against baselines run on the same machine in
// the same run, and prints one line per figure:
//
//	BENCH <name> ours=<value><unit> baseline=<value><unit> ratio=<ours/baseline>
//
// so figures can be compared over time. Run it with `make bench`.
package main
