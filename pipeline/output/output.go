// Package output writes a command's output path the way a user who names a device or a
// file expects, and refuses what must not be written, before anything is:
//
//   - a block device (a USB stick, a disk) is written in place: opened without
//     truncation, never renamed over, refused while it or a partition is mounted;
//   - a regular file, or a new one, is written beside itself and renamed into place only
//     once complete, so a failure leaves the old file (or none) and no partial file;
//   - a directory, a character device, a read-only file, a path whose directory does not
//     exist, and any path that is one of the command's own inputs are refused (*Error).
package output

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/snofactory/snofactory/pipeline/flock"
)

// Error refuses an output path before anything is written to it: the user's input.
type Error struct {
	Path, Problem string
}

func (e *Error) Error() string { return e.Path + ": " + e.Problem }

// MountedError refuses to write over a device that is in use.
type MountedError struct {
	Device     string
	MountPoint string // where it, or one of its partitions, is mounted
}

func (e *MountedError) Error() string {
	if strings.HasPrefix(e.MountPoint, "/") {
		return fmt.Sprintf("%s is mounted at %s: refusing to overwrite it", e.Device, e.MountPoint)
	}
	return fmt.Sprintf("%s is in use by %s: refusing to overwrite it", e.Device, e.MountPoint)
}

// IsRefused tells whether err refuses the output path (the user's input, exit 2).
func IsRefused(err error) bool {
	var oe *Error
	var me *MountedError
	return errors.As(err, &oe) || errors.As(err, &me)
}

// Check refuses an output path that must not be written (see the package doc); inputs are
// the command's input paths, which an output may not be (after symlinks). It reports
// whether path is a block device.
func Check(path string, inputs ...string) (block bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if parent, perr := os.Stat(filepath.Dir(path)); perr != nil || !parent.IsDir() {
			return false, &Error{Path: path, Problem: "its directory does not exist"}
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the output %s: %w", path, err)
	}
	for _, in := range inputs {
		if ifi, err := os.Stat(in); err == nil && os.SameFile(fi, ifi) {
			return false, &Error{Path: path, Problem: "is this command's input " + in + "; an output never overwrites an input"}
		}
	}
	switch {
	case fi.IsDir():
		return false, &Error{Path: path, Problem: "is a directory; give a file or a block device"}
	case fi.Mode()&fs.ModeCharDevice != 0:
		return false, &Error{Path: path, Problem: "is a character device; give a file or a block device"}
	case fi.Mode()&fs.ModeDevice != 0:
		if err := CheckNotMounted(path); err != nil {
			return true, err
		}
		return true, nil
	case !fi.Mode().IsRegular():
		return false, &Error{Path: path, Problem: "is neither a regular file nor a block device"}
	case fi.Mode().Perm()&0o222 == 0:
		return false, &Error{Path: path, Problem: "is a read-only file; make it writable, or remove it, to replace it"}
	}
	return false, nil
}

// CheckDir refuses an output directory (named by flag) that exists as something else, or
// that is, or holds, one of the command's inputs (after symlinks): what a command writes
// into its output directory must never land on what it reads.
func CheckDir(flag, dir string, inputs ...string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	if !fi.IsDir() {
		return &Error{Path: dir, Problem: flag + " is not a directory"}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		rin, err := filepath.EvalSymlinks(in)
		if err != nil {
			continue // an input that does not exist is reported by whoever reads it
		}
		if rel, err := filepath.Rel(real, rin); err == nil && filepath.IsLocal(rel) {
			return &Error{Path: dir, Problem: fmt.Sprintf("%s holds this command's input %s; write into a directory of its own", flag, in)}
		}
	}
	return nil
}

// Write checks path (Check, with inputs) and writes it through fill: a block device in
// place (fill gets it at offset 0, nothing is truncated, it is synced), anything else
// through a file beside it, created with perm, renamed into place once fill succeeded.
func Write(path string, perm os.FileMode, fill func(*os.File) error, inputs ...string) error {
	block, err := Check(path, inputs...)
	if err != nil {
		return err
	}
	if block {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_EXCL, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", path, err)
		}
		defer f.Close()
		if err := fill(f); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return f.Close()
	}
	removeStalePartials(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	// Held while the file fills: a later Write removes only partial files nobody holds,
	// those of a writer that was killed.
	if ok, err := flock.TryLock(tmp); !ok {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("creating %s: %w", path, cmp.Or(err, errors.New("its partial file is locked by another writer")))
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The final mode before any byte lands: the output is never more open than asked.
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("moving %s into place: %w", path, err)
	}
	done = true
	return syncDir(path)
}

// syncDir makes the rename of path durable: the new name is in its directory, which a
// crash would otherwise lose with the file's bytes already synced.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("syncing the directory of %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the directory of %s: %w", path, err)
	}
	return nil
}

// syncFile writes a finished file's bytes to disk before it is renamed into place, as
// Write does with its own partial file.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// removeStalePartials removes the partial files of path that no live Write holds locked.
func removeStalePartials(path string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial-*"))
	for _, p := range stale {
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if ok, _ := flock.TryLock(f); ok {
			os.Remove(p)
		}
		f.Close()
	}
}

// Place puts the finished file built at path: renamed over a file (with perm), copied
// into a block device. built is removed either way.
func Place(built, path string, perm os.FileMode, inputs ...string) error {
	defer os.Remove(built)
	block, err := Check(path, inputs...)
	if err != nil {
		return err
	}
	if !block {
		if err := os.Chmod(built, perm); err != nil {
			return err
		}
		if err := syncFile(built); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := os.Rename(built, path); err != nil {
			return fmt.Errorf("moving %s into place: %w", path, err)
		}
		return syncDir(path)
	}
	return Write(path, perm, func(f *os.File) error {
		src, err := os.Open(built)
		if err != nil {
			return err
		}
		defer src.Close()
		if _, err := io.Copy(f, src); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	}, inputs...)
}
