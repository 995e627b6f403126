package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/blueprints/depotfile"
	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/depot"
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
			sum, err := depot.Run(cmd.Context(), cfg)
			var busy *depot.BusyError
			if errors.As(err, &busy) {
				return badInput(err)
			}
			if sum != nil {
				printDepot(cmd.OutOrStdout(), sum)
				fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", filepath.Join(cfg.OutputDir, depot.HTMLFile))
			}
			if err != nil {
				return err
			}
			if sum.Status != depot.StatusSucceeded {
				return errors.New("depot: some builds failed (see the report)")
			}
			return nil
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
	return c
}

// config resolves the target and the flags into a depot run.
func (f *depotFlags) config(cmd *cobra.Command, target string) (depot.Config, error) {
	var cfg depot.Config
	for _, n := range []struct {
		flag string
		v    int
	}{{"parallel", f.parallel}, {"vms", f.vms}, {"attempts", f.attempts}, {"cpus", f.cpus}} {
		if cmd.Flags().Changed(n.flag) && n.v < 1 {
			return cfg, badInput(fmt.Errorf("--%s %d: want at least 1", n.flag, n.v))
		}
	}
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
	cfg.Selection = pipeline.Selection{Until: f.build.until, Force: f.build.force}
	slots := pipeline.Resources{VMs: pick(f.vms, spec.Slots.VMs, 2), CPUs: pick(f.cpus, spec.Slots.CPUs, 0), MemoryMiB: int(spec.Slots.Memory.MiB())}
	if f.memory != "" {
		m, err := v1alpha1.ParseSize(f.memory)
		if err != nil {
			return cfg, badInput(fmt.Errorf("--memory %s: %w", f.memory, err))
		}
		slots.MemoryMiB = int(m.MiB())
	}
	minFree := spec.MinFreeDisk
	if f.minFree != "" {
		if minFree, err = v1alpha1.ParseSize(f.minFree); err != nil {
			return cfg, badInput(fmt.Errorf("--min-free %s: %w", f.minFree, err))
		}
	}
	cfg.Slots = pipeline.NewPool(slots)
	cfg.MaxParallel, cfg.Attempts, cfg.MinFreeBytes = pick(f.parallel, spec.ParallelBuilds, 4), pick(f.attempts, spec.Attempts, 3), uint64(minFree)
	cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	// Each build runs the blueprint as validated at the start, even if its file changes
	// during the run.
	cfg.Load = func(path string) (*pipeline.Graph, pipeline.SecretSource, error) {
		l, ok := loaded[path]
		if !ok {
			return nil, nil, fmt.Errorf("%s: not among the depot's validated blueprints", path)
		}
		return l.graph, l.secrets, nil
	}
	cfg.Builds = depotBuilds(paths, loaded)
	return cfg, nil
}

// loadedBlueprint is one depot blueprint, validated and wired.
type loadedBlueprint struct {
	graph   *pipeline.Graph
	secrets pipeline.SecretSource
}

// validateAll loads every blueprint of the depot before anything runs, printing every
// problem of every one with its position: a depot never fails late for a bad file.
func validateAll(stderr io.Writer, paths []string) (map[string]loadedBlueprint, error) {
	loaded := map[string]loadedBlueprint{}
	bad := 0
	for _, p := range paths {
		_, g, secrets, err := loadGraph(p, graphFlags{publishes: true})
		if err != nil {
			fmt.Fprintln(stderr, err)
			bad++
			continue
		}
		loaded[p] = loadedBlueprint{graph: g, secrets: secrets}
	}
	if bad > 0 {
		return nil, badInput(fmt.Errorf("depot: %d of %d blueprints are invalid (above); nothing was built", bad, len(paths)))
	}
	return loaded, nil
}

// pick is the first value set: the flag, the depot file's, the default.
func pick(flag, file, def int) int {
	if flag != 0 {
		return flag
	}
	if file != 0 {
		return file
	}
	return def
}

// depotBuilds names each build by its blueprint's metadata.name (else its file name), made
// unique.
func depotBuilds(paths []string, loaded map[string]loadedBlueprint) []depot.Build {
	seen := map[string]int{}
	var out []depot.Build
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		if l, ok := loaded[p]; ok && l.graph.Blueprint != "" {
			name = l.graph.Blueprint
		}
		seen[name]++
		if n := seen[name]; n > 1 {
			name = fmt.Sprintf("%s-%d", name, n)
		}
		out = append(out, depot.Build{Name: name, Blueprint: p})
	}
	return out
}

func newDepotStatusCommand() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "status DIR",
		Short: "Show a depot's builds, while it runs or after",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := depot.ReadStatus(args[0])
			if err != nil {
				return badInput(err)
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(sum); err != nil {
					return err
				}
			case "text":
				printDepot(cmd.OutOrStdout(), sum)
			default:
				return badInput(fmt.Errorf("--output %q: want text or json", output))
			}
			// Scripts poll status: it exits 1 for a depot that failed or died.
			switch sum.Status {
			case depot.StatusFailed:
				return errors.New("depot: some builds failed")
			case depot.StatusInterrupted:
				return errors.New("depot: interrupted (its process is gone); run it again to finish the remaining builds")
			}
			return nil
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return c
}

// printDepot prints one line per build and the totals.
func printDepot(w io.Writer, s *depot.Summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tSTATUS\tATTEMPTS\tTIME\tFAILED STAGE\tOUTPUT")
	for _, b := range s.Builds {
		d := ""
		if !b.Started.IsZero() {
			end := b.Finished
			if end.IsZero() {
				end = time.Now()
			}
			d = end.Sub(b.Started).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", b.Name, b.Status, b.Attempts, d, b.FailedStage, b.OutputDir)
	}
	tw.Flush()
	counts, hits, misses := s.Counts()
	fmt.Fprintf(w, "depot %s: %d succeeded, %d failed, %d running, %d queued; stages: %d cache hits, %d runs\n",
		s.Status, counts[depot.StatusSucceeded], counts[depot.StatusFailed], counts[depot.StatusRunning], counts[depot.StatusQueued], hits, misses)
}
