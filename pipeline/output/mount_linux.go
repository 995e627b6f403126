package output

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckNotMounted returns a *MountedError when device (a block device, or a regular file
// attached to a loop device) or one of its partitions is mounted, per /proc/self/mountinfo.
// A device that does not exist yet is not mounted.
func CheckNotMounted(device string) error {
	devs, err := deviceNumbers(device)
	if err != nil || len(devs) == 0 {
		return err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("checking whether %s is mounted: %w", device, err)
	}
	defer f.Close()
	if mp, ok := mountedIn(f, devs); ok {
		return &MountedError{Device: device, MountPoint: mp}
	}
	// A device under LVM, RAID or dm-crypt is in use even when not mounted itself: the
	// running system's root may live on the device-mapper volume that holds it.
	if holder, ok := heldBy("/sys/dev/block", devs); ok {
		return &MountedError{Device: device, MountPoint: "a device it backs (" + holder + ": LVM, RAID or dm-crypt)"}
	}
	return nil
}

// heldBy finds, in a sysfs dev/block directory, a holder (a device-mapper or md device)
// of one of devs.
func heldBy(sysDevBlock string, devs map[string]bool) (string, bool) {
	for dev := range devs {
		if holders, _ := filepath.Glob(filepath.Join(sysDevBlock, dev, "holders", "*")); len(holders) > 0 {
			return filepath.Base(holders[0]), true
		}
	}
	return "", false
}

// deviceNumbers returns "major:minor" of the block devices that hold device's data: the
// device and its partitions, or for a regular file the loop devices backed by it and theirs.
func deviceNumbers(device string) (map[string]bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); errors.Is(err, unix.ENOENT) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("checking whether %s is mounted: %w", device, err)
	}
	devs := map[string]bool{}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		addWithPartitions(devs, fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	case unix.S_IFREG:
		abs, err := filepath.Abs(device)
		if err != nil {
			return nil, fmt.Errorf("checking whether %s is mounted: %w", device, err)
		}
		loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
		for _, l := range loops {
			if b, err := os.ReadFile(l); err == nil && strings.TrimSpace(string(b)) == abs {
				if dev, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(l)), "dev")); err == nil {
					addWithPartitions(devs, strings.TrimSpace(string(dev)))
				}
			}
		}
	}
	return devs, nil
}

// addWithPartitions adds dev and the partitions sysfs lists under it.
func addWithPartitions(devs map[string]bool, dev string) {
	devs[dev] = true
	parts, _ := filepath.Glob(filepath.Join("/sys/dev/block", dev, "*", "partition"))
	for _, p := range parts {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(p), "dev")); err == nil {
			devs[strings.TrimSpace(string(b))] = true
		}
	}
}

// mountedIn finds, in a mountinfo table, a mount of one of devs (field 3, major:minor) and
// returns its mount point (field 5).
func mountedIn(mountinfo io.Reader, devs map[string]bool) (string, bool) {
	s := bufio.NewScanner(mountinfo)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 5 && devs[f[2]] {
			return f[4], true
		}
	}
	return "", false
}
