package seed

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens the file f names again for writes that bypass the page cache
// (O_DIRECT): on a 2-core VM, copying a disk's gigabytes into the page cache costs more
// kernel time than decompressing them, and the writes' data has to reach the disk before
// the file is renamed into place anyway. nil where the file system refuses it (tmpfs).
func openDirect(f *os.File) *os.File {
	d, err := os.OpenFile(f.Name(), os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return d
}

// isDirectRefused says a direct write was refused for its alignment (a device whose
// logical blocks are larger than diskpack.Alignment).
func isDirectRefused(err error) bool { return errors.Is(err, unix.EINVAL) }
