package output

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// setDirect turns O_DIRECT on and off on an open file, as a large write does around its
// bulk, and leaves the file's other flags alone.
func TestSetDirect(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "disk.raw"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags := func() int {
		n, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := setDirect(f, true); errors.Is(err, unix.EINVAL) {
		t.Skipf("the file system of %s takes no O_DIRECT: %v", f.Name(), err)
	} else if err != nil {
		t.Fatal(err)
	}
	if got := flags(); got&unix.O_DIRECT == 0 || got&unix.O_APPEND == 0 {
		t.Errorf("flags %#x after turning O_DIRECT on", got)
	}
	if err := setDirect(f, false); err != nil {
		t.Fatal(err)
	}
	if got := flags(); got&unix.O_DIRECT != 0 || got&unix.O_APPEND == 0 {
		t.Errorf("flags %#x after turning O_DIRECT off", got)
	}
}

// Direct runs the write with O_DIRECT on and turns it off after, even when the write
// fails, and hands back the write's error.
func TestDirect(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	failed := errors.New("disk full")
	var during int
	direct, err := Direct(f, func() error {
		during, _ = unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		return failed
	})
	if !direct {
		t.Skipf("the file system of %s takes no O_DIRECT", f.Name())
	}
	after, ferr := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if !errors.Is(err, failed) || during&unix.O_DIRECT == 0 || ferr != nil || after&unix.O_DIRECT != 0 {
		t.Errorf("Direct = %v; flags %#x during the write, %#x (%v) after", err, during, after, ferr)
	}
}
