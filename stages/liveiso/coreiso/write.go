package coreiso

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/ncw/directio"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/pipeline/output"
)

// patch is bytes to write at an absolute offset.
type patch struct {
	off  int64
	data []byte
}

// checkPatches sorts patches and checks that they lie inside the image and
// do not overlap.
func checkPatches(iso *ISO, patches []patch) error {
	sort.Slice(patches, func(i, j int) bool { return patches[i].off < patches[j].off })
	for i, p := range patches {
		if p.off < 0 || p.off+int64(len(p.data)) > iso.size {
			return fmt.Errorf("%s: %w: write of %d bytes at %d falls outside the image", iso.Path, ErrMalformed, len(p.data), p.off)
		}
		if i > 0 && patches[i-1].off+int64(len(patches[i-1].data)) > p.off {
			return fmt.Errorf("%s: %w: embed areas overlap at byte %d", iso.Path, ErrMalformed, p.off)
		}
	}
	return nil
}

// openInPlace opens the ISO at p for changing it in place. Opening the path
// follows a symlink to its target, and a hard link is the same inode, so
// whichever strategy then writes through this file changes the file the user
// named, keeps its mode, owner and links, and is refused by its permissions
// alike, before any work is done.
func openInPlace(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening ISO for writing: %w", err)
	}
	return f, nil
}

// applyPatches writes patches into f. No fsync: it would flush every dirty
// page of the file (say, a download that just finished), turning a few-KiB
// patch into a gigabyte write; cp and coreos-installer do not sync either.
func applyPatches(f *os.File, patches []patch) (int64, error) {
	var n int64
	for _, p := range patches {
		if _, err := f.WriteAt(p.data, p.off); err != nil {
			return n, fmt.Errorf("%s: writing %d bytes at %d: %w", f.Name(), len(p.data), p.off, err)
		}
		n += int64(len(p.data))
	}
	return n, nil
}

// overwrite replaces the contents of dst (an ISO opened in place, or a block
// device) with the file at src, keeping dst's inode and so its links, mode and
// owner. The copy is not interrupted by ctx once it has started: a
// half-written ISO is worse than the seconds the rest of the copy takes.
func overwrite(ctx context.Context, dst *os.File, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := copyRange(context.WithoutCancel(ctx), dst, f, st.Size()); err != nil {
		return fmt.Errorf("writing the rebuilt ISO into %s: %w", dst.Name(), err)
	}
	if dt, err := dst.Stat(); err != nil || !dt.Mode().IsRegular() {
		return err // a block device keeps its size
	}
	if err := dst.Truncate(st.Size()); err != nil {
		return fmt.Errorf("%s: %w", dst.Name(), err)
	}
	return nil
}

// directChunk is what a direct copy reads and writes at a time: two of them in
// flight keep the disk busy while the next is read.
const directChunk = 8 << 20

// copyInto copies the first size bytes of src into dst, a new empty file or a
// device: sharing src's blocks where the file system can (FICLONE: btrfs,
// XFS), else past the page cache (O_DIRECT) where dst allows it, else with
// copy_file_range. Buffered, a gigabyte first fills the page cache: it is
// throttled with every other writer's dirty pages and then waits on the sync.
// Direct, it goes to the disk as it is read and the sync finds little to do.
func copyInto(ctx context.Context, dst, src *os.File, size int64) error {
	if st, err := src.Stat(); err == nil && st.Size() == size && unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())) == nil {
		return nil
	}
	bulk := size - size%output.DirectBlock
	if bulk == 0 {
		return copyRange(ctx, dst, src, size)
	}
	direct, err := output.Direct(dst, func() error { return copyDirect(ctx, dst, src, bulk) })
	if !direct {
		return copyRange(ctx, dst, src, size)
	}
	if err != nil || bulk == size {
		return err
	}
	tail := make([]byte, size-bulk)
	if _, err := src.ReadAt(tail, bulk); err != nil {
		return err
	}
	_, err = dst.WriteAt(tail, bulk)
	return err
}

// copyDirect copies the first size bytes (whole output.DirectBlocks) of src into dst,
// opened with O_DIRECT: one chunk is read while the one before it is written.
func copyDirect(ctx context.Context, dst, src *os.File, size int64) error {
	type chunk struct {
		buf []byte
		off int64
	}
	free := make(chan []byte, 2)
	for range cap(free) {
		free <- directio.AlignedBlock(directChunk)
	}
	full := make(chan chunk)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(full)
		for off := int64(0); off < size; off += directChunk {
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
			buf = buf[:min(directChunk, size-off)]
			if _, err := src.ReadAt(buf, off); err != nil {
				return err
			}
			select {
			case full <- chunk{buf, off}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for c := range full {
			if _, err := dst.WriteAt(c.buf, c.off); err != nil {
				return err
			}
			free <- c.buf[:cap(c.buf)]
		}
		return nil
	})
	return g.Wait()
}

// copyChunk is large so the fallback copy moves data in few syscalls; on
// Linux io.Copy between files uses copy_file_range and never touches it.
const copyChunk = 64 << 20

// copyRange copies the first size bytes of src to the start of dst, checking
// ctx between chunks.
func copyRange(ctx context.Context, dst, src *os.File, size int64) error {
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(copyChunk), size-off)
		// a SectionReader hides the *os.File, so hand io.Copy the files
		// themselves (positioned) to keep the copy_file_range fast path.
		if _, err := src.Seek(off, io.SeekStart); err != nil {
			return err
		}
		if _, err := dst.Seek(off, io.SeekStart); err != nil {
			return err
		}
		w, err := io.Copy(dst, io.LimitReader(src, n))
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
