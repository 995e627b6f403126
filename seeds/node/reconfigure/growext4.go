package reconfigure

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// PartitionResizer tells the kernel a partition's new length while it is mounted, which
// re-reading the whole table (BLKRRPART) cannot do on a busy disk: util-linux's resizepart
// and partx --update make the same BLKPG_RESIZE_PARTITION ioctl (disk-utils/resizepart.c
// main, include/partx.h partx_resize_partition). disk is the disk's device path; start and
// sectors are in 512-byte sectors.
type PartitionResizer func(ctx context.Context, disk string, number int, start, sectors int64) error

// gptEntry is what growpart keeps of a partition it re-creates larger (cloud-utils
// bin/growpart resize_sgdisk): sgdisk -i's type, unique GUID, attributes and name.
type gptEntry struct {
	typeGUID, guid, attrs, name string
	last                        int64
}

// growExt4ContainerStorage is the conformance OS's container-storage step, ordered as the
// OpenShift one is (first, before the network): the seed's last partition, ext4 from the
// conformance installer, takes a disk bigger than the seed. This OS has no growpart, and
// its initramfs no udev, so it does what growpart's sgdisk path does in one sgdisk run (the
// backup GPT to the disk's end, the entry re-created to the end with its type, GUID,
// attributes and name), tells the kernel the new length (PartitionResizer), and grows the
// file system online with resize2fs. resize2fs runs on every pass: a pass cut off after the
// table changed grows the file system the next time. The details give the partition's and
// the file system's sizes before and after.
func (r *run) growExt4ContainerStorage(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
	what, none, err := r.containerStorageUnit()
	if none != nil || err != nil {
		return none, err
	}
	p, last, diskSize, err := r.partitionOf(what)
	if err != nil {
		return nil, err
	}
	d := map[string]string{"partition": what, "device": "/dev/" + p.name, "disk": "/dev/" + p.disk,
		"disk_sectors": strconv.FormatInt(diskSize, 10), "start_sector": strconv.FormatInt(p.start, 10),
		"partition_sectors_before": strconv.FormatInt(p.size, 10)}
	if d["fs_bytes_before"], err = r.ext4Bytes(p.name); err != nil {
		return nil, err
	}
	if !last {
		d["grown"] = fmt.Sprintf("nothing: %s is not the last partition of /dev/%s", what, p.disk)
		return d, nil
	}
	d["grown"] = fmt.Sprintf("nothing: /dev/%s has no room after %s (the seed's disk size); the file system fills the partition", p.disk, what)
	if free := diskSize - gptTail - (p.start + p.size); free >= minGrowth {
		end, err := r.regrowGPTEntry(ctx, p)
		if err != nil {
			return nil, err
		}
		if err := r.o.ResizePartition(ctx, under(r.o.Root, "/dev/"+p.disk), p.number, p.start, end-p.start+1); err != nil {
			return nil, fmt.Errorf("telling the kernel /dev/%s now ends at sector %d: %w", p.name, end, err)
		}
		d["grown"] = fmt.Sprintf("by %d sectors, to the end of /dev/%s", end-p.start+1-p.size, p.disk)
	}
	if _, err := r.cmd(ctx, "resize2fs", "/dev/"+p.name); err != nil {
		return nil, err
	}
	after, _, _, err := r.partitionInfo(p.name)
	if err != nil {
		return nil, err
	}
	d["partition_sectors_after"] = strconv.FormatInt(after.size, 10)
	if d["fs_bytes_after"], err = r.ext4Bytes(p.name); err != nil {
		return nil, err
	}
	return d, nil
}

// regrowGPTEntry re-creates partition p from its start to the last usable sector after the
// backup GPT moved to the disk's end, keeping what sgdisk -i shows of it, and returns its
// new last sector as sgdisk -i then shows it (sgdisk may align the end).
func (r *run) regrowGPTEntry(ctx context.Context, p partition) (int64, error) {
	disk, n := "/dev/"+p.disk, strconv.Itoa(p.number)
	e, err := r.gptEntry(ctx, disk, n)
	if err != nil {
		return 0, err
	}
	if _, err := r.cmd(ctx, "sgdisk", "--move-second-header", "--delete="+n, "--new="+n+":"+strconv.FormatInt(p.start, 10)+":0",
		"--typecode="+n+":"+e.typeGUID, "--partition-guid="+n+":"+e.guid, "--attributes="+n+":=:"+e.attrs,
		"--change-name="+n+":"+e.name, disk); err != nil {
		return 0, err
	}
	if e, err = r.gptEntry(ctx, disk, n); err != nil {
		return 0, err
	}
	return e.last, nil
}

// gptEntry reads sgdisk -i N DISK (gptfdisk gpt.cc GPTData::ShowPartDetails, gptpart.cc
// GPTPart::ShowDetails), as growpart does.
func (r *run) gptEntry(ctx context.Context, disk, n string) (gptEntry, error) {
	out, err := r.cmd(ctx, "sgdisk", "-i", n, disk)
	if err != nil {
		return gptEntry{}, err
	}
	var e gptEntry
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "Partition GUID code":
			e.typeGUID, _, _ = strings.Cut(v, " ")
		case "Partition unique GUID":
			e.guid = v
		case "Attribute flags":
			e.attrs = v
		case "Partition name":
			e.name = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
		case "Last sector":
			f, _, _ := strings.Cut(v, " ")
			e.last, _ = strconv.ParseInt(f, 10, 64)
		}
	}
	if e.typeGUID == "" || e.guid == "" || e.attrs == "" || e.last == 0 {
		return e, fmt.Errorf("sgdisk -i %s %s: no partition %s in its answer: %q", n, disk, n, strings.TrimSpace(string(out)))
	}
	return e, nil
}

// ext4 superblock fields (e2fsprogs lib/ext2fs/ext2_fs.h struct ext2_super_block), from
// the superblock's start, 1024 bytes into the file system.
const (
	ext4SuperOffset  = 1024
	ext4BlocksLo     = 0x04
	ext4LogBlockSize = 0x18
	ext4Magic        = 0x38
	ext4Incompat     = 0x60
	ext4BlocksHi     = 0x150
	ext4Incompat64   = 0x80
	ext4MagicValue   = 0xEF53
)

// ext4Bytes is the size of the ext4 file system on partition name, from its superblock:
// where the file system ends, which the grow step reports.
func (r *run) ext4Bytes(name string) (string, error) {
	f, err := os.Open(under(r.o.Root, "/dev/"+name))
	if err != nil {
		return "", fmt.Errorf("reading the file system on /dev/%s: %w", name, err)
	}
	defer f.Close()
	sb := make([]byte, ext4BlocksHi+4)
	if _, err := io.ReadFull(io.NewSectionReader(f, ext4SuperOffset, int64(len(sb))), sb); err != nil {
		return "", fmt.Errorf("reading the ext4 superblock of /dev/%s: %w", name, err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[ext4Magic:]) != ext4MagicValue {
		return "", fmt.Errorf("/dev/%s holds no ext4 file system: the conformance installer makes the container-storage partition ext4", name)
	}
	blocks := uint64(le.Uint32(sb[ext4BlocksLo:]))
	if le.Uint32(sb[ext4Incompat:])&ext4Incompat64 != 0 {
		blocks |= uint64(le.Uint32(sb[ext4BlocksHi:])) << 32
	}
	return strconv.FormatUint(blocks<<(10+le.Uint32(sb[ext4LogBlockSize:])), 10), nil
}
