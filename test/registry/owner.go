package registry

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// dirPattern names every registry's private directory in the system temp directory.
const dirPattern = "snofactory-registry-"

// ownerLock is the file in a registry's directory that its owner (the process that
// started the registry) holds an flock on. The kernel drops the lock when the owner dies,
// however it dies, so an unlocked ownerLock marks a directory nobody will clean.
const ownerLock = "owner.lock"

// ownedDir creates a registry directory and returns it with the open, locked ownerLock.
// The lock file is locked under a temporary name and renamed into place, so a reaper
// never sees an ownerLock that is not yet locked.
func ownedDir() (dir string, owner *os.File, err error) {
	dir, err = os.MkdirTemp("", dirPattern)
	if err != nil {
		return "", nil, fmt.Errorf("registry: temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	owner, err = os.CreateTemp(dir, ".owner-*")
	if err != nil {
		return "", nil, fmt.Errorf("registry: owner lock: %w", err)
	}
	if err := syscall.Flock(int(owner.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner.Close()
		return "", nil, fmt.Errorf("registry: locking %s: %w", owner.Name(), err)
	}
	if err := os.Rename(owner.Name(), filepath.Join(dir, ownerLock)); err != nil {
		owner.Close()
		return "", nil, fmt.Errorf("registry: owner lock: %w", err)
	}
	return dir, owner, nil
}

// reapStale removes the directories of registries whose owner died without stopping
// them (kill -9): their registry died with the owner (see sysProcAttr), their storage
// did not. Directories without an ownerLock are left alone: they are being created, or
// were made by a version that did not lock them.
func reapStale(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern+"*"))
	for _, dir := range dirs {
		removed, err := reapIfOrphaned(dir)
		switch {
		case err != nil:
			log.Warn("could not remove a stale registry directory", "dir", dir, "err", err)
		case removed:
			log.Info("removed the directory of a registry whose owner died", "dir", dir)
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
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
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
