package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline/flock"
)

// WriteFileAtomic writes data to path through a temporary file in the same directory, synced
// and renamed over path, so readers see the old content or the new, never a torn file. The
// file has perm from the moment it exists, so secrets are never briefly world-readable.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LockFile waits for an exclusive flock on f, or until ctx ends. Closing f (or the process
// dying) releases it, so a killed build never leaves a lock held.
func LockFile(ctx context.Context, f *os.File) error {
	for {
		ok, err := flock.TryLock(f)
		if ok {
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the lock %s: %w", f.Name(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
