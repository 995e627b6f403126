package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/progress"
	"github.com/snofactory/snofactory/stages"
	"github.com/spf13/cobra"
)

// buildFlags are shared by build and plan, so both see the same graph and cache.
type buildFlags struct {
	cacheDir  string
	outputDir string
	until     string
	force     []string
}

func (f *buildFlags) register(c *cobra.Command, withOutput bool) {
	c.Flags().StringVar(&f.cacheDir, "cache-dir", "", "cache shared by builds (default $XDG_CACHE_HOME/snofactory)")
	c.Flags().StringVar(&f.until, "until", "", "stop after this stage")
	c.Flags().StringArrayVar(&f.force, "force", nil, "re-run this stage even if cached (repeatable)")
	if withOutput {
		c.Flags().StringVar(&f.outputDir, "output-dir", "", "where run.json, logs and stage outputs go (default ./snofactory-out/<blueprint name>)")
	}
}

func (f *buildFlags) cache() (*pipeline.Cache, error) {
	dir := f.cacheDir
	if dir == "" {
		d, err := pipeline.DefaultCacheDir()
		if err != nil {
			return nil, badInput(err)
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, badInput(fmt.Errorf("--cache-dir %s: %w", dir, err))
	}
	return &pipeline.Cache{Dir: abs}, nil
}

// graphFlags are how a command wires a blueprint's graph.
type graphFlags struct {
	// locked: the build must match the blueprint's lock file.
	locked bool
	// signKey and passphraseFile: build --sign-by and --passphrase-file.
	signKey, passphraseFile string
	// publishes: the command may run publish, so its signing key must open now.
	publishes bool
}

// loadGraph reads and validates a blueprint and wires its stage graph.
func loadGraph(path string, gf graphFlags) (*v1alpha1.Blueprint, *pipeline.Graph, pipeline.SecretSource, error) {
	bp, err := blueprints.LoadFile(path)
	if err != nil {
		return nil, nil, nil, badInput(err)
	}
	opts := stages.Options{SignKey: gf.signKey, SignPassphraseFile: gf.passphraseFile}
	locked := gf.locked
	// The node agent is this binary: a static Go program, so the same file runs in the guest.
	if opts.Agent, err = os.Executable(); err != nil {
		return nil, nil, nil, fmt.Errorf("finding the snofactory binary for the node agent: %w", err)
	}
	if locked {
		opts.LockFile = blueprints.LockPath(path)
		if err := stages.CheckLock(opts.LockFile); err != nil {
			return nil, nil, nil, badInput(fmt.Errorf("--locked: %w; create it with: snofactory lock %s", err, path))
		}
	}
	g, secrets, err := stages.GraphFor(path, bp, opts, gf.publishes)
	if err != nil {
		return nil, nil, nil, badInput(err)
	}
	return bp, g, secrets, nil
}

func newBuildCommand() *cobra.Command {
	var f buildFlags
	var progressMode string
	var keep bool
	gf := graphFlags{publishes: true}
	c := &cobra.Command{
		Use:   "build FILE",
		Short: "Build a blueprint: run every stage that is not cached",
		Long: `Build runs the blueprint's stages in order, reusing cached results, and writes run.json,
logs and links to each stage's outputs in the output directory. A build stopped by Ctrl-C or a
crash resumes where it stopped when run again.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.until != "" && f.until != stages.Publish {
				gf.publishes = false
			}
			bp, g, secrets, err := loadGraph(args[0], gf)
			if err != nil {
				return err
			}
			cache, err := f.cache()
			if err != nil {
				return err
			}
			out := f.outputDir
			if out == "" {
				out = filepath.Join("snofactory-out", bp.Metadata.Name)
			}
			sink, closeSink, err := progress.ForMode(progressMode, cmd.ErrOrStderr())
			if err != nil {
				return badInput(fmt.Errorf("--progress %w", err))
			}
			sel := pipeline.Selection{Until: f.until, Force: f.force}
			rec, err := pipeline.Build(cmd.Context(), g, pipeline.BuildOptions{
				Cache: cache, OutputDir: out, Selection: sel, Secrets: secrets, Sink: sink, KeepOnError: keep,
			})
			closeSink()
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return fmt.Errorf("build interrupted; run the same command again to resume (record: %s)", filepath.Join(out, pipeline.RecordFile))
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "build %s %s: %s\n", bp.Metadata.Name, rec.Status, filepath.Join(out, pipeline.RecordFile))
			return nil
		},
	}
	f.register(c, true)
	c.Flags().StringVar(&progressMode, "progress", "auto", "progress output: auto, plain or json (RFC 7464)")
	c.Flags().StringVar(&gf.signKey, "sign-by", "", "sign the published seed with this sigstore private key (instead of spec.outputs.signing)")
	c.Flags().StringVar(&gf.passphraseFile, "passphrase-file", "", "the signing key's passphrase (else $"+passphraseEnv+")")
	c.Flags().BoolVar(&gf.locked, "locked", false, "refuse to build if anything resolves differently from FILE.lock.json (see snofactory lock)")
	c.Flags().BoolVar(&keep, "keep-on-error", false, "keep a failed stage's partial outputs for inspection")
	return c
}

// exactArgs is cobra.ExactArgs with exit code 2 and a plain message.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return badInput(fmt.Errorf("%s takes %d argument(s), got %d; usage: %s", cmd.Name(), n, len(args), cmd.UseLine()))
		}
		return nil
	}
}
