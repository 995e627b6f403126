package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline/flock"
)

// ownerLock is the file in an owned temp directory that its owner holds an flock on. The
// kernel drops the lock when the owner dies, however it dies (kill -9 included), so an
// unlocked ownerLock marks a directory nobody will clean.
const ownerLock = "owner.lock"

// OwnedTempDir creates a private directory in the system temp directory whose name starts
// with prefix, locked by this process until owner is closed. Before that it removes the
// directories with the same prefix whose owners died without cleaning up (reapOrphaned), so
// a killed run's leftovers go with the next run.
func OwnedTempDir(prefix string, log *slog.Logger) (dir string, owner *os.File, err error) {
	return ownedDir(os.TempDir(), prefix, log)
}

// ownedDir is OwnedTempDir in parent.
func ownedDir(parent, prefix string, log *slog.Logger) (dir string, owner *os.File, err error) {
	reapOrphaned(parent, prefix, log)
	dir, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, fmt.Errorf("creating a temp directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	// Locked under a temporary name and renamed into place, so a reaper never sees an
	// ownerLock that is not locked yet.
	owner, err = os.CreateTemp(dir, ".owner-*")
	if err != nil {
		return "", nil, fmt.Errorf("creating the owner lock of %s: %w", dir, err)
	}
	if ok, err := flock.TryLock(owner); !ok {
		owner.Close()
		return "", nil, fmt.Errorf("locking %s: %w", owner.Name(), cmp.Or(err, errors.New("held by another process")))
	}
	if err := os.Rename(owner.Name(), filepath.Join(dir, ownerLock)); err != nil {
		owner.Close()
		return "", nil, fmt.Errorf("creating the owner lock of %s: %w", dir, err)
	}
	return dir, owner, nil
}

// reapOrphaned removes the directories in parent made by ownedDir with prefix whose owner
// is gone. Directories without an ownerLock are left alone: they are being created.
func reapOrphaned(parent, prefix string, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
	for _, dir := range dirs {
		removed, err := reapIfOrphaned(dir)
		switch {
		case err != nil:
			log.Warn("could not remove a stale temp directory", "dir", dir, "err", err)
		case removed:
			log.Info("removed the temp directory of a process that died", "dir", dir)
		}
	}
}

// reapIfOrphaned removes dir if its ownerLock exists and nobody holds it.
func reapIfOrphaned(dir string) (removed bool, err error) {
	f, err := os.Open(filepath.Join(dir, ownerLock))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	ok, err := flock.TryLock(f)
	if err == nil && !ok {
		return false, nil // its owner is alive
	}
	if err != nil {
		return false, err
	}
	// Holding the lock: its owner is gone and no other reaper removes it at the same time.
	if err := os.RemoveAll(dir); err != nil {
		return false, err
	}
	return true, nil
}
