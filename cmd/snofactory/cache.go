package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
)

func newCacheCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "List, measure and prune the build cache",
		Long: `The cache holds stage entries (entries/<stage>/<key>) and depot-wide stores of
downloaded blobs (shared/<name>): the precache blob store and the live ISO store.

An entry's last use is its last commit or cache hit by a build. A store blob's last use is
the later of the time it was stored and its access time as the filesystem records it (with
relatime at most daily, with noatime never). Sizes are disk usage; files hardlinked between
stores (precache layouts link the blob store) count once in totals.

Pruning is safe while builds run: what a running build (or a finished build of a process
still running, such as a depot run) has used is in use, and is never removed.`,
	}
	c.AddCommand(newCacheLsCommand(), newCacheDuCommand(), newCachePruneCommand())
	return c
}

// cacheFlags are the flags every cache subcommand takes.
type cacheFlags struct {
	cacheDir string
	output   string
}

func (f *cacheFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.cacheDir, "cache-dir", "", "the cache (default $XDG_CACHE_HOME/snofactory)")
	c.Flags().StringVarP(&f.output, "output", "o", "text", "text or json")
}

// open checks the flags and opens the cache.
func (f *cacheFlags) open() (*pipeline.Cache, error) {
	if err := textOrJSON("--output", f.output); err != nil {
		return nil, err
	}
	return (&buildFlags{cacheDir: f.cacheDir}).cache()
}

// items opens the cache and lists everything in it.
func (f *cacheFlags) items(ctx context.Context) ([]pipeline.CacheItem, error) {
	cache, err := f.open()
	if err != nil {
		return nil, err
	}
	return cache.Items(ctx)
}

func newCacheLsCommand() *cobra.Command {
	var f cacheFlags
	c := &cobra.Command{
		Use:   "ls",
		Short: "List cache entries and store blobs, least recently used first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := f.items(cmd.Context())
			if err != nil {
				return err
			}
			if f.output == "json" {
				return writeJSON(cmd.OutOrStdout(), orEmpty(items))
			}
			return pipeline.WriteItems(cmd.OutOrStdout(), items, time.Now())
		},
	}
	f.register(c)
	return c
}

func newCacheDuCommand() *cobra.Command {
	var f cacheFlags
	c := &cobra.Command{
		Use:   "du",
		Short: "Show the disk space of each cache store and in all",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := f.items(cmd.Context())
			if err != nil {
				return err
			}
			u := pipeline.UsageOf(items)
			if f.output == "json" {
				u.Stores = orEmpty(u.Stores)
				return writeJSON(cmd.OutOrStdout(), u)
			}
			return u.WriteText(cmd.OutOrStdout(), len(items))
		},
	}
	f.register(c)
	return c
}

func newCachePruneCommand() *cobra.Command {
	var (
		f                  cacheFlags
		maxSize, olderThan string
		dryRun             bool
	)
	c := &cobra.Command{
		Use:   "prune {--max-size SIZE | --older-than DURATION}",
		Short: "Remove least recently used cache items, never those a build is using",
		Long: `Prune removes, over all stores together, every item not used for longer than
--older-than, then the least recently used items until the cache uses at most --max-size.
A store blob goes only once no kept entry links it. Items a build is using are skipped.
It prints what it removed (with --dry-run, what it would remove) and the space freed.`,
		Example: `  snofactory cache prune --max-size 200GiB
  snofactory cache prune --older-than 30d --dry-run`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := pruneOptions(maxSize, olderThan, dryRun)
			if err != nil {
				return err
			}
			cache, err := f.open()
			if err != nil {
				return err
			}
			res, err := cache.Prune(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if f.output == "json" {
				res.Removed = orEmpty(res.Removed)
				return writeJSON(cmd.OutOrStdout(), res)
			}
			res.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&maxSize, "max-size", "", "shrink the cache to at most this size (512GiB, 2TiB; a bare number is MiB)")
	c.Flags().StringVar(&olderThan, "older-than", "", "remove what was not used for this long (90m, 36h, 30d)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only show what would be removed")
	return c
}

// pruneOptions reads the limits as blueprints write sizes and durations.
func pruneOptions(maxSize, olderThan string, dryRun bool) (pipeline.PruneOptions, error) {
	opts := pipeline.PruneOptions{DryRun: dryRun}
	if maxSize == "" && olderThan == "" {
		return opts, badInput(fmt.Errorf("nothing to prune by: give --max-size, --older-than or both"))
	}
	if maxSize != "" {
		s, err := v1alpha1.ParseSize(maxSize)
		if err != nil {
			return opts, badInput(fmt.Errorf("--max-size: %w", err))
		}
		opts.MaxSize = int64(s)
	}
	if olderThan != "" {
		d, err := v1alpha1.ParseDuration(olderThan)
		if err != nil {
			return opts, badInput(fmt.Errorf("--older-than: %w", err))
		}
		opts.OlderThan = d.D()
	}
	return opts, nil
}

// orEmpty makes an empty list encode as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSON prints v as indented JSON, as every -o json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// textOrJSON refuses an --output (or -o, as flag says) that is neither text nor json.
func textOrJSON(flag, output string) error {
	if output != "text" && output != "json" {
		return badInput(fmt.Errorf("%s %q: want text or json", flag, output))
	}
	return nil
}
