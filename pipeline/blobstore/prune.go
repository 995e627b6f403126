package blobstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline/flock"
)

// PruneOptions says what Prune removes.
type PruneOptions struct {
	// PartialAge: partial files untouched for longer are removed (0: every partial file no
	// writer holds).
	PartialAge time.Duration
	// Unlinked also removes stored blobs nothing else links (link count 1): blobs no
	// precache layout holds any more, and every downloaded ISO. They can be fetched again.
	Unlinked bool
}

// PruneStats says what Prune removed.
type PruneStats struct {
	Blobs    int   `json:"blobs"`
	Bytes    int64 `json:"bytes"`
	Partials int   `json:"partials"`
}

// Prune removes stale partial files and, if asked, unlinked blobs. A partial file a writer
// holds is never removed. Blobs another directory links are kept, so no layout loses one.
// Removing unlinked blobs is for when no build uses the store: a build that found a blob
// stored but has not linked it yet would fail to link it. (The cache's own prune guards
// against that with its store pins.)
func (s *Store) Prune(ctx context.Context, opts PruneOptions) (PruneStats, error) {
	var st PruneStats
	if opts.Unlinked {
		if err := s.pruneUnlinked(ctx, &st); err != nil {
			return st, err
		}
	}
	return st, s.prunePartials(ctx, opts.PartialAge, &st)
}

func (s *Store) pruneUnlinked(ctx context.Context, st *PruneStats) error {
	dir := filepath.Join(s.dir, blobDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading blob store %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); !ok || sys.Nlink != 1 {
			continue
		}
		if err := os.Remove(p); err != nil && !notExist(err) {
			return fmt.Errorf("pruning blob %s: %w", p, err)
		}
		st.Blobs++
		st.Bytes += fi.Size()
	}
	return nil
}

func (s *Store) prunePartials(ctx context.Context, age time.Duration, st *PruneStats) error {
	dir := filepath.Join(s.dir, partialDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading blob store %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < age {
			continue
		}
		removed, err := removeUnheld(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if removed {
			st.Partials++
		}
	}
	return nil
}

// removeUnheld removes a partial file unless a writer holds its lock. It removes while
// holding the lock itself, so a writer waiting for it sees the file gone and starts anew.
func removeUnheld(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	ok, err := flock.TryLock(f)
	if err == nil && !ok {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("locking partial blob %s: %w", p, err)
	}
	// The file locked may have been committed meanwhile and p be another writer's now.
	held, err1 := f.Stat()
	now, err2 := os.Stat(p)
	if err1 != nil || err2 != nil || !os.SameFile(held, now) {
		return false, nil
	}
	if err := os.Remove(p); err != nil {
		if notExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("pruning partial blob %s: %w", p, err)
	}
	return true, nil
}
