package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/blueprints/depotfile"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/depot"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/pipeline/tektondepot"
)

func newDepotCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "depot",
		Short: "Build many blueprints together with one cache and shared VM slots",
	}
	c.AddCommand(newDepotRunCommand(), newDepotStatusCommand())
	return c
}

// depotFlags override the depot file's settings.
type depotFlags struct {
	build     buildFlags
	vms, cpus int
	memory    string
	parallel  int
	minFree   string
	attempts  int
	tk        tektondepot.Options
	slotVMs   int
}

func newDepotRunCommand() *cobra.Command {
	var f depotFlags
	c := &cobra.Command{
		Use:   "run DEPOT.yaml|DIR|GLOB",
		Short: "Run the builds of a depot file, of every blueprint in a directory, or of a glob",
		Long: `depot run builds many blueprints with one shared cache: a stage several builds need
(the same key: e.g. blueprints of the same release precache once) is built once while the
others wait for it. Factory VMs are bounded by --vms (and --cpus, --memory); new builds wait
while the cache's disk has less than --min-free. Builds continue past failures; a build that
fails for a transient reason (registry, network) is retried with backoff. The status is kept
in OUTPUT/depot.json (see depot status); at the end OUTPUT holds depot.json, depot.junit.xml
and report.html, and each build's output under OUTPUT/builds/NAME. A killed depot started
again finishes the remaining builds; what was built is a cache hit.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config(cmd, args[0])
			if err != nil {
				return err
			}
			sum, err := f.tk.Run(cmd.Context(), args[0], cfg, f.slotVMs)
			if busy := (*depot.BusyError)(nil); errors.As(err, &busy) {
				return badInput(err)
			}
			return depot.Finish(cmd.OutOrStdout(), sum, cfg.OutputDir, err)
		},
	}
	f.build.register(c, true)
	fl := c.Flags()
	fl.IntVar(&f.vms, "vms", 0, "factory VMs at once (default: the depot file's, else 2)")
	fl.IntVar(&f.cpus, "cpus", 0, "CPUs all VMs may use together (default: no limit)")
	fl.StringVar(&f.memory, "memory", "", "memory all VMs may use together, e.g. 32GiB (default: no limit)")
	fl.IntVar(&f.parallel, "parallel", 0, "builds in flight (default 4)")
	fl.StringVar(&f.minFree, "min-free", "", "start no new build while the cache's disk has less free space, e.g. 20GiB")
	fl.IntVar(&f.attempts, "attempts", 0, "tries per build for transient failures (default 3)")
	f.tk.Register(fl)
	return c
}

// config resolves the target and the flags into a depot run.
func (f *depotFlags) config(cmd *cobra.Command, target string) (depot.Config, error) {
	var cfg depot.Config
	paths, spec, err := depotfile.Target(target)
	if err != nil {
		return cfg, badInput(err)
	}
	loaded, err := validateAll(cmd.ErrOrStderr(), paths)
	if err != nil {
		return cfg, err
	}
	if cfg.Cache, err = f.build.cache(); err != nil {
		return cfg, err
	}
	cfg.OutputDir = f.build.outputDir
	if cfg.OutputDir == "" {
		cfg.OutputDir = "depot-out"
	}
	// What the depot writes under its output directory must never land on what it reads.
	if err := output.CheckDir("--output-dir", cfg.OutputDir, append([]string{target}, paths...)...); err != nil {
		return cfg, badInput(err)
	}
	cfg.Selection = pipeline.Selection{Until: f.build.until, Force: f.build.force}
	set, err := spec.Resolve(depotfile.Overrides{VMs: f.vms, CPUs: f.cpus, Parallel: f.parallel, Attempts: f.attempts, Memory: f.memory, MinFree: f.minFree})
	if err != nil {
		return cfg, badInput(err)
	}
	spec.Tekton.Under(&f.tk)
	cfg.Slots, f.slotVMs = pipeline.NewPool(set.Slots), set.Slots.VMs
	cfg.MaxParallel, cfg.Attempts, cfg.MinFreeBytes = set.Parallel, set.Attempts, set.MinFreeBytes
	cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	cfg.Load, cfg.Builds = loaded.Load, loaded.Builds(paths)
	return cfg, nil
}

// validateAll loads every blueprint of the depot before anything runs, printing every
// problem of every one with its position: a depot never fails late for a bad file.
func validateAll(stderr io.Writer, paths []string) (depot.Preloaded, error) {
	loaded := depot.Preloaded{}
	bad := 0
	for _, p := range paths {
		_, g, secrets, err := loadGraph(p, graphFlags{publishes: true})
		if err != nil {
			fmt.Fprintln(stderr, err)
			bad++
			continue
		}
		loaded[p] = depot.Loaded{Graph: g, Secrets: secrets}
	}
	if bad > 0 {
		return nil, badInput(fmt.Errorf("depot: %d of %d blueprints are invalid (above); nothing was built", bad, len(paths)))
	}
	return loaded, nil
}

func newDepotStatusCommand() *cobra.Command {
	var output string
	var tk tektondepot.Options
	c := &cobra.Command{
		Use:   "status DIR",
		Short: "Show a depot's builds, while it runs or after",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := tk.ReadStatus(cmd.Context(), cmd.Flags(), args[0], slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
			if err != nil {
				return err
			}
			if err := textOrJSON("--output", output); err != nil {
				return err
			}
			if output == "json" {
				err = writeJSON(cmd.OutOrStdout(), sum)
			} else {
				err = sum.WriteText(cmd.OutOrStdout(), time.Now())
			}
			if err != nil {
				return err
			}
			// Scripts poll status: it exits 1 for a depot that failed or died.
			return sum.Err()
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	tk.RegisterStatus(c.Flags())
	return c
}
