package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/flock"
)

// Pruning: removing cache items by age and size, safely while builds run. An item a build
// holds (its lock or its pin, see lease.go) is left alone, and each removal is a rename into
// trash/ followed by a delete, so a reader never sees half an entry.

// ledger counts the cache's disk space with each inode once, and what removing items frees:
// an inode's space comes back when its last link goes.
type ledger struct {
	left  map[inodeID]uint64
	bytes map[inodeID]int64
	total int64
}

func newLedger(items []CacheItem) *ledger {
	l := &ledger{left: map[inodeID]uint64{}, bytes: map[inodeID]int64{}}
	for _, it := range items {
		for _, f := range it.files {
			if _, ok := l.left[f.id]; !ok {
				l.left[f.id], l.bytes[f.id] = f.nlink, f.bytes
				l.total += f.bytes
			}
		}
	}
	return l
}

// remove drops the item's links; it returns the bytes freed and whether some inode it
// linked lives on (so another item may have become the sole holder of it).
func (l *ledger) remove(it CacheItem) (freed int64, shared bool) {
	for _, f := range it.files {
		if l.left[f.id] == 0 {
			continue
		}
		l.left[f.id]--
		if l.left[f.id] == 0 {
			freed += l.bytes[f.id]
		} else {
			shared = true
		}
	}
	l.total -= freed
	return freed, shared
}

// sole is true when every file of the item has no link left but the item's own.
func (l *ledger) sole(it CacheItem) bool {
	for _, f := range it.files {
		if l.left[f.id] > 1 {
			return false
		}
	}
	return true
}

// PruneOptions says what to prune. With neither limit set, nothing is removed.
type PruneOptions struct {
	// MaxSize, if positive, removes least recently used items until the cache uses at most
	// this many bytes.
	MaxSize int64
	// OlderThan, if positive, removes every item not used for longer than this.
	OlderThan time.Duration
	// DryRun only reports what would be removed.
	DryRun bool
	// Clock measures the items' ages (nil: the wall clock).
	Clock clock.Clock
}

// PruneResult is what Prune removed (or with DryRun, would remove).
type PruneResult struct {
	Removed []CacheItem `json:"removed"`
	// Skipped were selected but a build started using them before they could be removed.
	Skipped []CacheItem `json:"skipped,omitempty"`
	Freed   int64       `json:"freed"`
	Before  int64       `json:"before"`
	After   int64       `json:"after"`
	DryRun  bool        `json:"dryRun"`
}

// selectPrune picks the items to remove, in removal order: first everything unused for
// longer than OlderThan, then the least recently used until the total is at most MaxSize.
// Items in use are never picked. A blob is picked only when no other link holds its content
// (an entry that hardlinks it, or one being kept): removing the store's copy would free
// nothing and only cost a download later.
func selectPrune(items []CacheItem, opts PruneOptions, now time.Time) []int {
	order := make([]int, 0, len(items))
	for i, it := range items {
		if !it.InUse {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return lruOrder(items[a], items[b]) })
	l := newLedger(items)
	removed := make([]bool, len(items))
	var picked []int
	eligible := func(i int) bool {
		return !removed[i] && (items[i].Stage != "" || l.sole(items[i]))
	}
	// take removes item i; it reports whether an older blob may have become removable.
	take := func(i int) bool {
		removed[i] = true
		picked = append(picked, i)
		_, shared := l.remove(items[i])
		return shared
	}
	if opts.OlderThan > 0 {
		for changed := true; changed; {
			changed = false
			for _, i := range order {
				if eligible(i) && now.Sub(items[i].LastUsed) > opts.OlderThan {
					take(i)
					changed = true
				}
			}
		}
	}
	if opts.MaxSize > 0 {
		for pos := 0; pos < len(order) && l.total > opts.MaxSize; pos++ {
			if i := order[pos]; eligible(i) && take(i) {
				pos = -1 // start again from the oldest: a blob this entry linked may be free now
			}
		}
	}
	return picked
}

// Prune removes cache items by age and size (see PruneOptions). It is safe while builds run:
// an entry whose lock or pin a build holds, and a store a build has pinned, are left alone,
// and each removal is a rename into trash/ followed by a delete, so a reader never sees half
// an entry.
func (c *Cache) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	now := clock.Or(opts.Clock).Now
	items, err := c.Items(ctx)
	if err != nil {
		return PruneResult{}, err
	}
	res := PruneResult{DryRun: opts.DryRun, Before: newLedger(items).total}
	picked := selectPrune(items, opts, now())
	if opts.DryRun {
		for _, i := range picked {
			res.Removed = append(res.Removed, items[i])
		}
		res.Freed = freed(items, res.Removed)
		res.After = res.Before - res.Freed
		return res, nil
	}
	c.emptyTrash()
	// Entries first: removing them drops the links that keep store blobs shared.
	var blobs []CacheItem
	for _, i := range picked {
		it := items[i]
		if it.Stage == "" {
			blobs = append(blobs, it)
			continue
		}
		ok, err := c.removeEntry(it)
		if err != nil {
			return res, err
		}
		if ok {
			res.Removed = append(res.Removed, it)
		} else {
			res.Skipped = append(res.Skipped, it)
		}
	}
	removed, skipped, err := c.removeBlobs(ctx, blobs)
	res.Removed, res.Skipped = append(res.Removed, removed...), append(res.Skipped, skipped...)
	res.Freed = freed(items, res.Removed)
	res.After = res.Before - res.Freed
	return res, err
}

// freed is what removing these items frees out of all items.
func freed(all, removed []CacheItem) int64 {
	l := newLedger(all)
	var n int64
	for _, it := range removed {
		f, _ := l.remove(it)
		n += f
	}
	return n
}

// removeEntry moves an entry into the trash and deletes it, unless a build holds its lock or
// pin, or used it since it was listed (ok=false).
func (c *Cache) removeEntry(it CacheItem) (ok bool, err error) {
	unlock, ok := tryLock(c.lockPath(it.Key + ".lock"))
	if !ok {
		return false, nil
	}
	defer unlock()
	unpin, ok := tryLock(c.lockPath(it.Key + ".use"))
	if !ok {
		return false, nil
	}
	defer unpin()
	dir := c.entryDir(it.Stage, it.Key)
	if fi, err := os.Stat(dir + ".json"); err == nil && fi.ModTime().After(it.LastUsed) {
		return false, nil
	}
	trash, err := c.trashDir("entry-")
	if err != nil {
		return false, err
	}
	defer removeTree(trash)
	// The record goes first: a reader then sees no entry, never a record without its files.
	for _, p := range []string{dir + ".json", dir} {
		if err := os.Rename(p, filepath.Join(trash, filepath.Base(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("pruning cache entry %s/%s: %w", it.Stage, it.Key, err)
		}
	}
	return true, nil
}

// removeBlobs removes blobs store by store, each while holding the store's pin, so no build
// can find a blob stored and then fail to link it. A blob some link still holds (an entry
// kept, or one that linked it since it was listed) stays.
func (c *Cache) removeBlobs(ctx context.Context, blobs []CacheItem) (removed, skipped []CacheItem, err error) {
	byStore := map[string][]CacheItem{}
	for _, b := range blobs {
		byStore[b.Store] = append(byStore[b.Store], b)
	}
	for _, store := range slices.Sorted(maps.Keys(byStore)) {
		if err := ctx.Err(); err != nil {
			return removed, skipped, err
		}
		r, s, err := c.removeStoreBlobs(store, byStore[store])
		removed, skipped = append(removed, r...), append(skipped, s...)
		if err != nil {
			return removed, skipped, err
		}
	}
	return removed, skipped, nil
}

func (c *Cache) removeStoreBlobs(store string, blobs []CacheItem) (removed, skipped []CacheItem, err error) {
	unpin, ok := tryLock(c.lockPath(storePin(strings.TrimPrefix(store, "shared/"))))
	if !ok {
		return nil, blobs, nil
	}
	trash, err := c.trashDir("blobs-")
	if err != nil {
		unpin()
		return nil, blobs, err
	}
	defer removeTree(trash)
	defer unpin() // runs before the delete: the renames are what needs the pin
	for _, b := range blobs {
		if !soleLink(b.Path) {
			skipped = append(skipped, b)
			continue
		}
		if err := os.Rename(b.Path, filepath.Join(trash, filepath.Base(b.Path))); err != nil {
			return removed, append(skipped, b), fmt.Errorf("pruning blob %s from %s: %w", b.Key, store, err)
		}
		removed = append(removed, b)
	}
	return removed, skipped, nil
}

func (c *Cache) trashDir(prefix string) (string, error) {
	d := filepath.Join(c.Dir, "trash")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("creating the cache trash: %w", err)
	}
	t, err := os.MkdirTemp(d, prefix)
	if err != nil {
		return "", fmt.Errorf("creating the cache trash: %w", err)
	}
	return t, nil
}

// emptyTrash deletes what a killed prune left in the trash; nothing reads it.
func (c *Cache) emptyTrash() {
	old, _ := filepath.Glob(filepath.Join(c.Dir, "trash", "*"))
	for _, d := range old {
		removeTree(d)
	}
}

// removeTree deletes a tree, making read-only folders writable first if it has to.
func removeTree(dir string) error {
	if os.RemoveAll(dir) == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// tryLock takes an exclusive flock on path if it is free, creating the lock file (and its
// folder) so that a build arriving meanwhile waits on the same file.
func tryLock(path string) (unlock func(), ok bool) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false
	}
	if ok, err := flock.TryLock(f); !ok || err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
