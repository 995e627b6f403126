package output

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DirectBlock is the unit of a direct write (O_DIRECT): whole 4 KiB blocks at 4 KiB
// offsets from 4 KiB-aligned memory suit disks and file systems of 512-byte and 4 KiB
// sectors.
const DirectBlock = 4096

// Direct runs write with O_DIRECT on f, for the bulk of a large output, which then skips
// the page cache, and turns it off again for what is not whole aligned blocks. Where f's
// file system cannot write directly it runs nothing and returns false.
func Direct(f *os.File, write func() error) (bool, error) {
	if setDirect(f, true) != nil {
		return false, nil
	}
	err := write()
	if derr := setDirect(f, false); err == nil && derr != nil {
		err = fmt.Errorf("leaving direct writes: %w", derr)
	}
	return true, err
}

// setDirect turns O_DIRECT on or off on f, leaving its other flags alone; a file system
// that cannot write directly refuses to turn it on (EINVAL).
func setDirect(f *os.File, on bool) error {
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
