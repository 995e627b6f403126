package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// Container storage on a partition of its own (a blueprint's spec.disk.containerStorage).
const (
	// ContainerStorageMountFile is the mount unit the MachineConfig's Ignition wrote; its
	// What= is the partition, as lifecycle-agent reads it (lca-cli/ops/ops.go
	// GetContainerStorageTarget).
	ContainerStorageMountFile = "/etc/systemd/system/var-lib-containers.mount"
	ContainerStoragePath      = "/var/lib/containers"
	byPartlabel               = "/dev/disk/by-partlabel/"
	// gptTail is what a GPT keeps after the last usable sector: the backup partition
	// array (32 sectors of 512 bytes for 128 entries) and the backup header.
	gptTail = 33
	// minGrowth: less free space than this after the partition is alignment slack, not a
	// bigger disk (growpart leaves 1 MiB-aligned partitions too).
	minGrowth = 2048
	// Caps on what the step reads: a unit file, and a sysfs number.
	maxUnitFile    = 64 << 10
	maxSysfsNumber = 64
)

// partition is a disk partition as sysfs shows it (Documentation/ABI/testing/sysfs-block:
// /sys/class/block/<part>/partition, start and size in 512-byte sectors).
type partition struct {
	disk, name  string
	number      int
	start, size int64
}

// growContainerStorage lets the container-storage partition, the seed disk's last, take a
// disk bigger than the seed at the site's first boot, as RHCOS's first boot lets its root
// take the disk (ignition-ostree-growfs runs growpart and grows the file system). It moves
// the GPT's backup header to the disk's end first (sgdisk -e), since a seed written to a
// bigger disk keeps it where the seed's disk ended, then growpart and xfs_growfs online.
// A node without the partition, or a disk no bigger than the seed, is left as it is.
func (r *run) growContainerStorage(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
	what, none, err := r.containerStorageUnit()
	if none != nil || err != nil {
		return none, err
	}
	p, last, diskSize, err := r.partitionOf(what)
	if err != nil {
		return nil, err
	}
	d := map[string]string{"partition": what, "device": "/dev/" + p.name, "disk": "/dev/" + p.disk}
	free := diskSize - gptTail - (p.start + p.size)
	if !last {
		d["grown"] = fmt.Sprintf("nothing: %s is not the last partition of /dev/%s", what, p.disk)
		return d, nil
	}
	cmds := [][]string{{"xfs_growfs", ContainerStoragePath}}
	d["grown"] = fmt.Sprintf("nothing: /dev/%s has no room after %s (the seed's disk size); the file system fills the partition", p.disk, what)
	if free >= minGrowth {
		cmds = append([][]string{{"sgdisk", "-e", "/dev/" + p.disk}, {"growpart", "/dev/" + p.disk, strconv.Itoa(p.number)}}, cmds...)
		d["grown"] = fmt.Sprintf("by %d sectors, to the end of /dev/%s", free, p.disk)
	}
	// xfs_growfs runs on every pass (a no-op on a full file system), so a pass cut off
	// after growpart grows the file system the next time.
	for _, argv := range cmds {
		if _, err := r.cmd(ctx, argv[0], argv[1:]...); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// partitionOf resolves a /dev/disk/by-partlabel link (udev's, relative to /dev) to its
// partition in sysfs, says whether it is the last on its disk, and gives the disk's size.
func (r *run) partitionOf(link string) (p partition, last bool, diskSize int64, err error) {
	name, err := r.partitionName(link)
	if err != nil {
		return p, false, 0, err
	}
	return r.partitionInfo(name)
}

// containerStorageUnit is the container-storage mount unit's What=, a by-partlabel path;
// without the unit, none is the step's result: the node has no such partition.
func (r *run) containerStorageUnit() (what string, none map[string]string, err error) {
	unit, err := smallfile.Read(under(r.o.Root, ContainerStorageMountFile), maxUnitFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", map[string]string{"grown": "nothing: " + ContainerStoragePath + " is on the root file system"}, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("reading %s: %w", ContainerStorageMountFile, err)
	}
	what = unitValue(string(unit), "What")
	if !strings.HasPrefix(what, byPartlabel) {
		return "", nil, fmt.Errorf("%s mounts %q, not a %s path: the seed was not built with spec.disk.containerStorage", ContainerStorageMountFile, what, byPartlabel)
	}
	return what, nil, nil
}

// partitionName is the kernel's name of the partition a /dev/disk/by-partlabel path names:
// udev's link where udev runs, else the partition whose sysfs uevent carries that GPT name
// (PARTNAME=, block/partitions/core.c part_uevent), as the conformance OS's initramfs,
// which has no udev, finds it.
func (r *run) partitionName(link string) (string, error) {
	dev, err := filepath.EvalSymlinks(under(r.o.Root, link))
	if err == nil {
		return filepath.Base(dev), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("the container-storage partition %s: %w", link, err)
	}
	label := strings.TrimPrefix(link, byPartlabel)
	uevents, gerr := filepath.Glob(under(r.o.Root, "/sys/class/block/*/uevent"))
	if gerr != nil {
		return "", fmt.Errorf("the container-storage partition %s: %w", link, gerr)
	}
	for _, u := range uevents {
		b, rerr := smallfile.Read(u, maxUnitFile)
		if rerr == nil && slices.Contains(strings.Split(string(b), "\n"), "PARTNAME="+label) {
			return filepath.Base(filepath.Dir(u)), nil
		}
	}
	return "", fmt.Errorf("the container-storage partition %s: no udev link and no partition named %q in sysfs: %w", link, label, err)
}

// partitionInfo reads a partition's place on its disk from sysfs.
func (r *run) partitionInfo(name string) (p partition, last bool, diskSize int64, err error) {
	p.name = name
	sys := under(r.o.Root, "/sys/class/block/"+p.name)
	real, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return p, false, 0, fmt.Errorf("the container-storage partition %s in sysfs: %w", p.name, err)
	}
	// A partition's sysfs directory sits in its disk's.
	p.disk = filepath.Base(filepath.Dir(real))
	nums, err := readInts(real, "partition", "start", "size")
	if err != nil {
		return p, false, 0, fmt.Errorf("the container-storage partition %s: %w", p.name, err)
	}
	p.number, p.start, p.size = int(nums[0]), nums[1], nums[2]
	size, err := readInts(filepath.Dir(real), "size")
	if err != nil {
		return p, false, 0, fmt.Errorf("the disk %s: %w", p.disk, err)
	}
	entries, err := os.ReadDir(filepath.Dir(real))
	if err != nil {
		return p, false, 0, fmt.Errorf("the partitions of %s: %w", p.disk, err)
	}
	last = true
	for _, e := range entries {
		other := filepath.Join(filepath.Dir(real), e.Name())
		if st, err := readInts(other, "partition", "start"); err == nil && st[1] > p.start {
			last = false
		}
	}
	return p, last, size[0], nil
}

// readInts reads sysfs files of dir that each hold one decimal number.
func readInts(dir string, names ...string) ([]int64, error) {
	out := make([]int64, len(names))
	for i, n := range names {
		b, err := smallfile.Read(filepath.Join(dir, n), maxSysfsNumber)
		if err != nil {
			return nil, err
		}
		if out[i], err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, n), err)
		}
	}
	return out, nil
}

// unitValue is the last value of key in a systemd unit's text.
func unitValue(unit, key string) string {
	v := ""
	for _, line := range strings.Split(unit, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.TrimSpace(k) == key {
			v = strings.TrimSpace(val)
		}
	}
	return v
}
