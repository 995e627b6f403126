package output

import (
	"os"

	"golang.org/x/sys/unix"
)

// SetDirect turns O_DIRECT on or off on f, leaving its other flags alone; a file system
// that cannot write directly refuses to turn it on (EINVAL). A writer turns it on for the
// bulk of a large output, which then skips the page cache, and off for what is not whole
// aligned blocks.
func SetDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		var flags int
		if flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr != nil {
			return
		}
		if on {
			flags |= unix.O_DIRECT
		} else {
			flags &^= unix.O_DIRECT
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, flags)
	}); err != nil {
		return err
	}
	return ferr
}
