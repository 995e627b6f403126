package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
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
	if f.output != "text" && f.output != "json" {
		return nil, badInput(fmt.Errorf("--output %q: want text or json", f.output))
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
				return writeCacheJSON(cmd.OutOrStdout(), orEmpty(items))
			}
			return printCacheItems(cmd.OutOrStdout(), items, time.Now())
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
				return writeCacheJSON(cmd.OutOrStdout(), u)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STORE\tITEMS\tSIZE")
			for _, s := range u.Stores {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Store, s.Items, units.BytesSize(float64(s.Bytes)))
			}
			fmt.Fprintf(tw, "total\t%d\t%s\n", len(items), cacheBytes(u.Total))
			return tw.Flush()
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
				return writeCacheJSON(cmd.OutOrStdout(), res)
			}
			printCachePrune(cmd.OutOrStdout(), res)
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

func printCacheItems(w io.Writer, items []pipeline.CacheItem, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tSTAGE\tKEY\tSIZE\tLAST USED\tIN USE")
	for _, it := range items {
		stage, inUse := it.Stage, "no"
		if stage == "" {
			stage = "-"
		}
		if it.InUse {
			inUse = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.Store, stage, shortCacheKey(it.Key), units.BytesSize(float64(it.Size)), usedAgo(now, it.LastUsed), inUse)
	}
	return tw.Flush()
}

func printCachePrune(w io.Writer, res pipeline.PruneResult) {
	verb, freed, uses := "removed", "freed", "uses"
	if res.DryRun {
		verb, freed, uses = "would remove", "would free", "would use"
	}
	for _, it := range res.Removed {
		fmt.Fprintf(w, "%s %s\n", verb, describeCacheItem(it))
	}
	for _, it := range res.Skipped {
		fmt.Fprintf(w, "skipped %s: a build started using it\n", describeCacheItem(it))
	}
	fmt.Fprintf(w, "%s %s in %d items; the cache %s %s\n", freed, cacheBytes(res.Freed), len(res.Removed), uses, units.BytesSize(float64(res.After)))
}

func describeCacheItem(it pipeline.CacheItem) string {
	what := it.Store + " " + shortCacheKey(it.Key)
	if it.Stage != "" {
		what = "stage " + it.Stage + " entry " + shortCacheKey(it.Key)
	}
	return fmt.Sprintf("%s (%s, last used %s)", what, units.BytesSize(float64(it.Size)), it.LastUsed.Format(time.RFC3339))
}

// shortCacheKey keeps keys readable in a table; the JSON output has them whole.
func shortCacheKey(k string) string {
	algo, hex, ok := strings.Cut(k, ":")
	if !ok {
		algo, hex = "", k
	} else {
		algo += ":"
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return algo + hex
}

func usedAgo(now, t time.Time) string {
	return t.Local().Format("2006-01-02 15:04") + " (" + now.Sub(t).Round(time.Minute).String() + " ago)"
}

func cacheBytes(n int64) string {
	return fmt.Sprintf("%s (%d bytes)", units.BytesSize(float64(n)), n)
}

// orEmpty makes an empty list encode as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeCacheJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
