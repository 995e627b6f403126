package output

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A disk whose partition backs a device-mapper volume (LVM, RAID, dm-crypt) is in use
// even though the disk itself is mounted nowhere; sysfs says so under holders/. (A fake
// sysfs tree: device-mapper is not available on every machine the tests run on.)
func TestHeldBy(t *testing.T) {
	sys := t.TempDir()
	os.MkdirAll(filepath.Join(sys, "8:0", "holders"), 0o755)
	os.MkdirAll(filepath.Join(sys, "8:2", "holders", "dm-0"), 0o755)
	if h, ok := heldBy(sys, map[string]bool{"8:0": true, "8:2": true}); !ok || h != "dm-0" {
		t.Errorf("heldBy = %q, %v; want dm-0", h, ok)
	}
	if _, ok := heldBy(sys, map[string]bool{"8:0": true}); ok {
		t.Error("a disk with no holder is held")
	}
	err := &MountedError{Device: "/dev/sda", MountPoint: "a device it backs (dm-0: LVM, RAID or dm-crypt)"}
	if !strings.Contains(err.Error(), "/dev/sda is in use by a device it backs (dm-0") {
		t.Errorf("message %q", err)
	}
}
