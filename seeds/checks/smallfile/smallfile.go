// Package smallfile is the seeds' name for pipeline/smallfile, the one reader of the small
// files a user names: a regular file after symlinks, opened without blocking, read up to a
// cap, with errors that name the file and the cap; and Open, the same rule without the cap
// for inputs that are streamed. The implementation lives with the engine's leaf helpers so
// the engine can use it too.
package smallfile

import (
	"os"

	"github.com/snofactory/snofactory/pipeline/smallfile"
)

// ErrTooLarge matches (errors.Is) the error Read returns for a file over its cap.
var ErrTooLarge = smallfile.ErrTooLarge

// ErrNotRegular matches the error Read returns for a FIFO, a device, a directory or a socket.
var ErrNotRegular = smallfile.ErrNotRegular

// Read returns the content of the regular file at path, of at most limit bytes; see
// pipeline/smallfile.Read.
func Read(path string, limit int64) ([]byte, error) { return smallfile.Read(path, limit) }

// Open opens the regular file at path to be streamed, without a cap; see
// pipeline/smallfile.Open.
func Open(path string) (*os.File, error) { return smallfile.Open(path) }

// OpenOrBlockDevice is Open that also accepts a block device; see
// pipeline/smallfile.OpenOrBlockDevice.
func OpenOrBlockDevice(path string) (*os.File, error) { return smallfile.OpenOrBlockDevice(path) }
