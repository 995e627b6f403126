package coreiso

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// writePatches applies patches to iso: in place when out is "", else by
// copying the ISO to out (kernel-side copy where possible) and patching the
// copy. The output appears atomically under its final name, already with
// mode perm (unused in place).
func writePatches(ctx context.Context, iso *ISO, out string, patches []patch, perm os.FileMode) (int64, error) {
	sort.Slice(patches, func(i, j int) bool { return patches[i].off < patches[j].off })
	for i, p := range patches {
		if p.off < 0 || p.off+int64(len(p.data)) > iso.size {
			return 0, fmt.Errorf("%s: %w: write of %d bytes at %d falls outside the image", iso.Path, ErrMalformed, len(p.data), p.off)
		}
		if i > 0 && patches[i-1].off+int64(len(patches[i-1].data)) > p.off {
			return 0, fmt.Errorf("%s: %w: embed areas overlap at byte %d", iso.Path, ErrMalformed, p.off)
		}
	}
	if out == "" {
		f, err := os.OpenFile(iso.Path, os.O_RDWR, 0)
		if err != nil {
			return 0, fmt.Errorf("opening ISO for writing: %w", err)
		}
		// No fsync: it would flush every dirty page of the file (say, a
		// download that just finished), turning a few-KiB patch into a
		// gigabyte write; cp and the -o mode do not sync either.
		n, err := applyPatches(f, patches)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", iso.Path, err)
		}
		return n, nil
	}

	if same, err := sameFile(iso.Path, out); err != nil {
		return 0, err
	} else if same {
		return 0, fmt.Errorf("%w: output %s is the input ISO; omit the output to change it in place", ErrInvalidInput, out)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("creating output: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The final mode is set before any byte lands, so the output is never
	// more open than asked, not even between the copy and the rename.
	if err := tmp.Chmod(perm); err != nil {
		return 0, fmt.Errorf("%s: %w", out, err)
	}
	if err := copyFile(ctx, tmp, iso); err != nil {
		return 0, fmt.Errorf("copying %s to %s: %w", iso.Path, out, err)
	}
	n, err := applyPatches(tmp, patches)
	if err != nil {
		return n, fmt.Errorf("%s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return n, fmt.Errorf("%s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return n, fmt.Errorf("moving output into place: %w", err)
	}
	committed = true
	return n, nil
}

func applyPatches(f *os.File, patches []patch) (int64, error) {
	var n int64
	for _, p := range patches {
		if _, err := f.WriteAt(p.data, p.off); err != nil {
			return n, fmt.Errorf("writing %d bytes at %d: %w", len(p.data), p.off, err)
		}
		n += int64(len(p.data))
	}
	return n, nil
}

// copyChunk is large so the fallback copy moves data in few syscalls; on
// Linux io.Copy between files uses copy_file_range and never touches it.
const copyChunk = 64 << 20

// copyFile copies the whole ISO into dst, checking ctx between chunks.
func copyFile(ctx context.Context, dst *os.File, iso *ISO) error {
	var off int64
	for off < iso.size {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(copyChunk), iso.size-off)
		// a SectionReader hides the *os.File, so hand io.Copy the file
		// itself (positioned) to keep the copy_file_range fast path.
		if _, err := iso.f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		w, err := io.Copy(dst, io.LimitReader(iso.f, n))
		if err != nil {
			return err
		}
		if w != n {
			return fmt.Errorf("%w: short copy (%d of %d bytes at %d)", io.ErrUnexpectedEOF, w, n, off)
		}
		off += n
	}
	return nil
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
