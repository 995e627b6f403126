package seed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/opencontainers/go-digest"
)

// MountedError refuses to write a seed over a device that is in use.
type MountedError struct {
	Device     string
	MountPoint string // where it, or one of its partitions, is mounted
}

func (e *MountedError) Error() string {
	return fmt.Sprintf("%s is mounted at %s: refusing to overwrite it", e.Device, e.MountPoint)
}

// WriteDevice streams the raw disk of the seed in dir onto device, a block device or a
// regular file (created if missing), hashing what it writes and checking it against the
// manifest's raw digest, as a depot writer or an edge installer does. It prefers the raw
// (zstd) form, which streams without a temporary file. It refuses a device that is, or
// has a partition that is, mounted (*MountedError) and a block device smaller than the disk.
// On a regular file, runs of zeros become holes.
func WriteDevice(ctx context.Context, dir, device string) (Disk, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Disk{}, err
	}
	d := m.Disks[0]
	for _, x := range m.Disks {
		if x.Format == FormatRaw {
			d = x
		}
	}
	if err := CheckNotMounted(device); err != nil {
		return d, err
	}
	f, block, err := openDevice(device, d.VirtualSize)
	if err != nil {
		return d, err
	}
	defer f.Close()
	rc, err := RawReader(ctx, dir, d)
	if err != nil {
		return d, err
	}
	defer rc.Close()
	slog.InfoContext(ctx, "writing seed disk", "file", d.File, "device", device, "bytes", d.VirtualSize)
	n, got, err := copyHashed(ctx, f, rc, !block)
	if err != nil {
		return d, fmt.Errorf("writing %s onto %s: %w", d.File, device, err)
	}
	if !block {
		if err := f.Truncate(n); err != nil {
			return d, fmt.Errorf("writing %s onto %s: %w", d.File, device, err)
		}
	}
	if err := f.Sync(); err != nil {
		return d, fmt.Errorf("writing %s onto %s: %w", d.File, device, err)
	}
	if got != d.RawDigest || n != d.VirtualSize {
		return d, fmt.Errorf("%s now holds bad data: %w", device,
			&MismatchError{File: d.File, What: "raw digest", Want: d.RawDigest, Got: got, WantSize: d.VirtualSize, GotSize: n})
	}
	return d, f.Close()
}

// openDevice opens a block device (checking it can hold size bytes) or creates a regular file.
func openDevice(device string, size int64) (*os.File, bool, error) {
	fi, err := os.Stat(device)
	if errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(device, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		return f, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("opening the target device: %w", err)
	}
	switch {
	case fi.Mode().IsRegular():
		f, err := os.OpenFile(device, os.O_WRONLY|os.O_TRUNC, 0)
		return f, false, err
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		f, err := os.OpenFile(device, os.O_WRONLY|os.O_EXCL, 0)
		if err != nil {
			return nil, true, fmt.Errorf("opening the target device: %w", err)
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err == nil && end < size {
			err = fmt.Errorf("%s holds %d bytes, the seed's disk needs %d", device, end, size)
		}
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, true, err
		}
		return f, true, nil
	}
	return nil, false, fmt.Errorf("%s is neither a block device nor a regular file", device)
}

// copyHashed copies r to w and returns the bytes and digest of what it read. With sparse,
// all-zero blocks are skipped with a seek instead of written.
func copyHashed(ctx context.Context, w *os.File, r io.Reader, sparse bool) (int64, digest.Digest, error) {
	const block = 1 << 20
	buf := make([]byte, block)
	zero := make([]byte, block)
	dg := digest.SHA256.Digester()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, "", err
		}
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			dg.Hash().Write(buf[:k])
			if sparse && bytes.Equal(buf[:k], zero[:k]) {
				_, werr := w.Seek(int64(k), io.SeekCurrent)
				if werr != nil {
					return n, "", werr
				}
			} else if _, werr := w.Write(buf[:k]); werr != nil {
				return n, "", werr
			}
			n += int64(k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, dg.Digest(), nil
		}
		if err != nil {
			return n, "", err
		}
	}
}
