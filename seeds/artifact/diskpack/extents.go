package diskpack

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// extent is a range of a disk that may hold data.
type extent struct{ off, len int64 }

// dataExtents lists the ranges of f's first size bytes that hold data, as the filesystem
// reports them (SEEK_DATA/SEEK_HOLE): a sparse disk's holes are never read. Holes shorter
// than merge are read as data, so that the chunk boundaries do not depend on small holes
// a copy may or may not keep. Where the file cannot say (a block device), all of it is data.
func dataExtents(f *os.File, size, merge int64) ([]extent, error) {
	fd := int(f.Fd())
	var out []extent
	var off int64
	for off < size {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from here on
		}
		if err != nil {
			if off == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) {
				return []extent{{0, size}}, nil
			}
			return nil, &os.PathError{Op: "seek data", Path: f.Name(), Err: err}
		}
		if start >= size {
			break
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, &os.PathError{Op: "seek hole", Path: f.Name(), Err: err}
		}
		end = min(end, size)
		if n := len(out); n > 0 && start-(out[n-1].off+out[n-1].len) < merge {
			out[n-1].len = end - out[n-1].off
		} else {
			out = append(out, extent{start, end - start})
		}
		off = end
	}
	return out, nil
}
