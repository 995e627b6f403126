package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeUnder writes a small file at p under root with perm, creating its directory.
func writeUnder(root, p string, b []byte, perm os.FileMode) error {
	dst := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.WriteFile(dst, append(b, '\n'), perm); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

func truncateIfExists(p string) error {
	if err := os.Truncate(p, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emptying %s: %w", p, err)
	}
	return nil
}

// shred overwrites a file with zeros in place, syncs it and removes it: removing alone
// leaves the content in the free blocks of the disk, which the seed would then carry.
func shred(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() {
		_, err = f.Write(make([]byte, fi.Size()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("overwriting %s: %w", p, err)
	}
	return os.Remove(p)
}

func removeAll(paths []string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SealDetails are the sealed report's details: one per step.
func SealDetails(steps []SealStep) map[string]string {
	d := map[string]string{}
	for _, s := range steps {
		d["step."+s.Name] = s.Detail
	}
	return d
}
