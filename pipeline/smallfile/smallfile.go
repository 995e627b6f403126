// Package smallfile reads the small files a user names (a blueprint, a site config, a pull
// secret, a key, a manifest) with a cap on their size. Every such read refuses what is not a
// regular file after symlinks, so a FIFO, a device or a directory given by mistake (or on
// purpose) neither blocks the reader nor feeds it without end, and every error names the
// file and, when the file is too large, the cap. It sits with the engine's leaf helpers so
// the engine (pull secrets, depot records) and every layer above share this one reader;
// docs/inputs.md lists every input that goes through it and its cap.
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrTooLarge matches (errors.Is) the error Read returns for a file over its cap.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular matches the error Read returns for a FIFO, a device, a directory or a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrSymlink matches the error ReadNoFollow returns for a symlink.
var ErrSymlink = errors.New("is a symlink, not followed")

// sizeError says the cap; it matches ErrTooLarge.
type sizeError struct{ limit int64 }

func (e sizeError) Error() string        { return fmt.Sprintf("larger than %d bytes", e.limit) }
func (e sizeError) Is(target error) bool { return target == ErrTooLarge }

// Read returns the content of the regular file at path, of at most limit bytes. Its errors
// are *os.PathError naming path: "read PATH: larger than LIMIT bytes" matches ErrTooLarge,
// "read PATH: not a regular file" matches ErrNotRegular.
func Read(path string, limit int64) ([]byte, error) {
	return read(path, limit, 0)
}

// ReadNoFollow is Read for a file only its own program writes (by renaming into place): a
// symlink at path was put there by someone else and is refused, in the open itself
// (O_NOFOLLOW), so it cannot be swapped in between a check and the read. The error
// matches ErrSymlink.
func ReadNoFollow(path string, limit int64) ([]byte, error) {
	return read(path, limit, syscall.O_NOFOLLOW)
}

// TooLarge is the error Read gives for the file at path over limit, for a reader that
// streams a capped file itself (hashing it, say) rather than holding it: "read PATH:
// larger than LIMIT bytes", matching ErrTooLarge.
func TooLarge(path string, limit int64) error {
	return &os.PathError{Op: "read", Path: path, Err: sizeError{limit}}
}

func read(path string, limit int64, flags int) ([]byte, error) {
	f, err := open(path, "read", flags, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, TooLarge(path, limit)
	}
	return data, nil
}

// Open opens the regular file at path (after symlinks) to be streamed, for the inputs that
// are large by nature (an ISO, a disk, a file hashed for a cache key): the same rule as
// Read without the cap. "open PATH: not a regular file" matches ErrNotRegular.
func Open(path string) (*os.File, error) { return open(path, "open", 0, false) }

// OpenOrBlockDevice is Open that also accepts a block device, for the inputs where a device
// is the point (a medium in a drive, the disk --from names). A character device such as
// /dev/zero, a FIFO, a directory or a socket is still refused.
func OpenOrBlockDevice(path string) (*os.File, error) { return open(path, "open", 0, true) }

// open opens path without blocking, with flags added, and refuses what is not a regular
// file (or, with device, a block device). op names the operation in the error.
func open(path, op string, flags int, device bool) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer. It changes
	// nothing for reads of a regular file or a block device.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|flags, 0)
	if flags&syscall.O_NOFOLLOW != 0 && errors.Is(err, syscall.ELOOP) {
		return nil, &os.PathError{Op: op, Path: path, Err: ErrSymlink}
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	m := fi.Mode()
	if m.IsRegular() || device && m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0 {
		return f, nil
	}
	f.Close()
	return nil, &os.PathError{Op: op, Path: path, Err: ErrNotRegular}
}
