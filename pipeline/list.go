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

	"github.com/snofactory/snofactory/pipeline/flock"
)

// Listing and measuring everything the cache holds, for prune and `snofactory cache`.
//
// Last use. An entry's last use is the modification time of its record
// (entries/<stage>/<key>.json): written at commit and touched on every cache hit by a build.
// A blob in a shared store (shared/<name>/sha256/<hex>) has no record; its last use is the
// later of its modification time (when it was stored) and its access time, as the filesystem
// keeps it (with relatime, updated at most daily; with noatime, never).

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

// markUsed records a use of the entry (a cache hit) as its record's modification time. Only
// builds pin an entry, so a plan that looks an entry up does not count as a use.
func (c *Cache) markUsed(stage, key string) {
	if c.pinned(key + ".use") {
		now := c.now()
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
