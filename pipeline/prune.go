package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/flock"
)

// Cache management: listing, measuring and pruning everything the cache holds, safely while
// builds run.
//
// Last use. An entry's last use is the modification time of its record
// (entries/<stage>/<key>.json): written at commit and touched on every cache hit by a build.
// A blob in a shared store (shared/<name>/sha256/<hex>) has no record; its last use is the
// later of its modification time (when it was stored) and its access time, as the filesystem
// keeps it (with relatime, updated at most daily; with noatime, never).
//
// Pins. A build must not lose an entry it has used but no longer holds the lock of: a
// downstream stage reads its upstream's folder after that stage's lock is released. So each
// entry a Cache value locks is also pinned, with a shared flock on locks/<key>.use, and each
// shared store it hands a stage is pinned with locks/shared-<name>.use. Pins last until
// Release (or the process ends). Prune removes an entry only while holding both its lock and
// its pin exclusively, and a store's blobs only while holding the store's pin exclusively, so
// it never races a build that is about to read an entry or to hardlink a blob it found stored.

// StoreEntries is the store name of stage entries; shared stores are "shared/<name>".
const StoreEntries = "entries"

// CacheItem is one removable unit of the cache: a stage entry or a shared-store blob.
type CacheItem struct {
	Store string `json:"store"`
	// Stage is the stage of an entry; empty for a blob.
	Stage string `json:"stage,omitempty"`
	// Key is an entry's cache key or a blob's digest (sha256:<hex>).
	Key  string `json:"key"`
	Path string `json:"path"`
	// Size is the disk space of the item's files (allocated blocks, as du counts them).
	// A file hardlinked elsewhere in the cache counts in full here, once in Usage.
	Size     int64     `json:"size"`
	LastUsed time.Time `json:"lastUsed"`
	// InUse is true while a build holds the item's lock or pin: prune leaves it alone.
	InUse bool `json:"inUse"`

	files []fileRef
}

// fileRef is one link to an inode, for counting hardlinked files once.
type fileRef struct {
	id    inodeID
	nlink uint64
	bytes int64
}

type inodeID struct{ dev, ino uint64 }

// StoreUsage is the disk space one store uses.
type StoreUsage struct {
	Store string `json:"store"`
	Items int    `json:"items"`
	Bytes int64  `json:"bytes"`
}

// Usage is the disk space of the cache per store and overall. Total counts a file
// hardlinked between stores (a precache layout blob and its store copy) once, so it can be
// less than the sum of the stores.
type Usage struct {
	Stores []StoreUsage `json:"stores"`
	Total  int64        `json:"total"`
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Items lists every entry and shared-store blob of the cache, oldest use first. A cache
// directory that does not exist yet is empty.
func (c *Cache) Items(ctx context.Context) ([]CacheItem, error) {
	entries, err := c.entryItems(ctx)
	if err != nil {
		return nil, err
	}
	blobs, err := c.blobItems(ctx)
	if err != nil {
		return nil, err
	}
	items := append(entries, blobs...)
	slices.SortStableFunc(items, lruOrder)
	return items, nil
}

func lruOrder(a, b CacheItem) int {
	return cmp.Or(a.LastUsed.Compare(b.LastUsed), strings.Compare(a.Store, b.Store), strings.Compare(a.Key, b.Key))
}

// entryItems lists entries/<stage>/<key> (folder and record; either may be missing after a
// crash, and the other is still worth removing).
func (c *Cache) entryItems(ctx context.Context) ([]CacheItem, error) {
	root := filepath.Join(c.Dir, "entries")
	stages, err := readDirIfAny(root)
	if err != nil {
		return nil, err
	}
	var items []CacheItem
	for _, sd := range stages {
		if !sd.IsDir() {
			continue
		}
		names, err := readDirIfAny(filepath.Join(root, sd.Name()))
		if err != nil {
			return nil, err
		}
		keys := map[string]bool{}
		for _, n := range names {
			if k := strings.TrimSuffix(n.Name(), ".json"); hexKey.MatchString(k) {
				keys[k] = true
			}
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			it, err := c.entryItem(ctx, sd.Name(), k)
			if err != nil {
				return nil, err
			}
			items = append(items, it)
		}
	}
	return items, nil
}

func (c *Cache) entryItem(ctx context.Context, stage, key string) (CacheItem, error) {
	dir := c.entryDir(stage, key)
	it := CacheItem{Store: StoreEntries, Stage: stage, Key: key, Path: dir}
	for _, p := range []string{dir + ".json", dir} {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return it, fmt.Errorf("cache entry %s/%s: %w", stage, key, err)
		}
		// The record's mtime is the last use; without a record, the folder's is the best left.
		if it.LastUsed.IsZero() {
			it.LastUsed = fi.ModTime()
		}
	}
	if err := addFiles(ctx, &it, dir+".json"); err != nil {
		return it, err
	}
	if err := addFiles(ctx, &it, dir); err != nil {
		return it, err
	}
	it.InUse = held(c.lockPath(key+".lock")) || held(c.lockPath(key+".use"))
	return it, nil
}

// blobItems lists the blobs of every shared store: shared/<name>/sha256/<hex>. Partial
// downloads and lock files are the stores' own business and are not listed.
func (c *Cache) blobItems(ctx context.Context) ([]CacheItem, error) {
	stores, err := readDirIfAny(filepath.Join(c.Dir, "shared"))
	if err != nil {
		return nil, err
	}
	var items []CacheItem
	for _, sd := range stores {
		if !sd.IsDir() {
			continue
		}
		store := "shared/" + sd.Name()
		inUse := held(c.lockPath(storePin(sd.Name())))
		dir := filepath.Join(c.Dir, "shared", sd.Name(), "sha256")
		blobs, err := readDirIfAny(dir)
		if err != nil {
			return nil, err
		}
		for _, b := range blobs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if !b.Type().IsRegular() || !hexKey.MatchString(b.Name()) {
				continue
			}
			it := CacheItem{Store: store, Key: "sha256:" + b.Name(), Path: filepath.Join(dir, b.Name()), InUse: inUse}
			fi, err := os.Lstat(it.Path)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("blob %s in %s: %w", b.Name(), store, err)
			}
			it.LastUsed = fi.ModTime()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				if at := time.Unix(st.Atim.Unix()); at.After(it.LastUsed) {
					it.LastUsed = at
				}
			}
			if err := addFiles(ctx, &it, it.Path); err != nil {
				return nil, err
			}
			items = append(items, it)
		}
	}
	return items, nil
}

// addFiles adds the regular files at or below path to the item.
func addFiles(ctx context.Context, it *CacheItem, path string) error {
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we looked (a concurrent prune)
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no file system metadata", p)
		}
		f := fileRef{id: inodeID{uint64(st.Dev), st.Ino}, nlink: uint64(st.Nlink), bytes: st.Blocks * 512}
		it.files = append(it.files, f)
		it.Size += f.bytes
		return nil
	})
	if err != nil {
		return fmt.Errorf("measuring %s: %w", path, err)
	}
	return nil
}

// UsageOf sums items per store and overall.
func UsageOf(items []CacheItem) Usage {
	var u Usage
	idx := map[string]int{}
	seen := map[string]map[inodeID]bool{}
	for _, it := range items {
		i, ok := idx[it.Store]
		if !ok {
			i = len(u.Stores)
			idx[it.Store] = i
			u.Stores = append(u.Stores, StoreUsage{Store: it.Store})
			seen[it.Store] = map[inodeID]bool{}
		}
		u.Stores[i].Items++
		for _, f := range it.files {
			if !seen[it.Store][f.id] {
				seen[it.Store][f.id] = true
				u.Stores[i].Bytes += f.bytes
			}
		}
	}
	slices.SortFunc(u.Stores, func(a, b StoreUsage) int { return strings.Compare(a.Store, b.Store) })
	u.Total = newLedger(items).total
	return u
}

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

func (c *Cache) lockPath(name string) string { return filepath.Join(c.Dir, "locks", name) }

func storePin(name string) string { return "shared-" + name + ".use" }

// soleLink reports whether path is a regular file with no other hardlink.
func soleLink(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && st.Nlink == 1
}

// held reports whether someone holds a flock on path, probing without waiting and without
// creating anything (listing the cache writes nothing).
func held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if ok, err := flock.TryLock(f); !ok || err != nil {
		return true
	}
	flock.Unlock(f)
	return false
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

// pinRef is one held pin and how many leases hold it.
type pinRef struct {
	f    *os.File
	refs int
}

// lease is the pins one build took: they are dropped when the build ends (Build releases
// it), so prune may remove what a finished build used while other builds run on. Pins taken
// outside a build belong to the Cache's own lease, dropped by Release.
type lease struct{ names map[string]bool }

type leaseKey struct{}

func withLease(ctx context.Context, l *lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// pin takes a shared flock on locks/<name> for the lease in ctx (else the Cache's own, until
// Release). Prune takes the same lock exclusively, and only briefly, so waiting here is short.
func (c *Cache) pin(ctx context.Context, name string) error {
	l, _ := ctx.Value(leaseKey{}).(*lease)
	c.mu.Lock()
	defer c.mu.Unlock()
	if l == nil {
		if c.own == nil {
			c.own = &lease{names: map[string]bool{}}
		}
		l = c.own
	}
	if p, ok := c.pins[name]; ok {
		if !l.names[name] {
			l.names[name] = true
			p.refs++
		}
		return nil
	}
	f, err := c.flockShared(ctx, name)
	if err != nil {
		return err
	}
	if c.pins == nil {
		c.pins = map[string]*pinRef{}
	}
	c.pins[name] = &pinRef{f: f, refs: 1}
	l.names[name] = true
	return nil
}

// flockShared opens locks/<name> and takes a shared flock on it, waiting while prune holds it.
func (c *Cache) flockShared(ctx context.Context, name string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(c.Dir, "locks"), 0o755); err != nil {
		return nil, fmt.Errorf("pinning %s: %w", name, err)
	}
	f, err := os.OpenFile(c.lockPath(name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pinning %s: %w", name, err)
	}
	for {
		ok, err := flock.TryShared(f)
		if ok {
			return f, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("pinning %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("pinning %s: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newLease starts the lease of one build.
func (c *Cache) newLease() *lease { return &lease{names: map[string]bool{}} }

// releaseLease drops a build's pins; a pin another build still holds stays.
func (c *Cache) releaseLease(l *lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range l.names {
		p, ok := c.pins[name]
		if !ok {
			continue
		}
		if p.refs--; p.refs <= 0 {
			p.f.Close()
			delete(c.pins, name)
		}
	}
	l.names = map[string]bool{}
}

func (c *Cache) pinned(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pins[name]
	return ok
}

// Release drops every pin this Cache holds on the entries and shared stores its builds
// used, so prune may remove them. Call it when no build using c is running any more; the
// process ending releases them too.
func (c *Cache) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.pins {
		p.f.Close()
		delete(c.pins, name)
	}
	c.own = nil
}

// markUsed records a use of the entry (a cache hit) as its record's modification time. Only
// builds pin an entry, so a plan that looks an entry up does not count as a use.
func (c *Cache) markUsed(stage, key string) {
	if c.pinned(key + ".use") {
		now := time.Now()
		os.Chtimes(c.entryDir(stage, key)+".json", now, now)
	}
}

func readDirIfAny(dir string) ([]fs.DirEntry, error) {
	ds, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return ds, nil
}
