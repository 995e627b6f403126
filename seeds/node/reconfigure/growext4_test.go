package reconfigure

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// gptEntryState is one GPT entry as the stand-in sgdisk keeps it on the disk.
type gptEntryState struct {
	typeGUID, guid, attrs, name string
	first, last                 int64
}

// ext4Disk is the conformance OS's seed disk as the stand-ins see it: the GPT on the
// disk (sgdisk's view), sysfs (the kernel's view, which only the BLKPG resize changes) and
// the ext4 superblock on the partition's device file.
type ext4Disk struct {
	fakeDisk
	backupAt int64
	entries  map[int64]*gptEntryState
}

func (g *ext4Disk) sysfs(part int64, file string) string {
	return filepath.Join(g.root, "sys/class/block", g.disk+strconv.FormatInt(part, 10), file)
}

// writeExt4 writes an ext4 superblock with the 64bit feature (mke2fs's default for ext4),
// 4 KiB blocks, on the partition's device file.
func (g *ext4Disk) writeExt4(t *testing.T, part, blocks int64) {
	t.Helper()
	sb := make([]byte, 2048)
	le := binary.LittleEndian
	le.PutUint32(sb[1024+ext4BlocksLo:], uint32(blocks))
	le.PutUint32(sb[1024+ext4BlocksHi:], uint32(blocks>>32))
	le.PutUint32(sb[1024+ext4LogBlockSize:], 2)
	le.PutUint16(sb[1024+ext4Magic:], ext4MagicValue)
	le.PutUint32(sb[1024+ext4Incompat:], 0x2c2|ext4Incompat64)
	if err := os.WriteFile(filepath.Join(g.root, "dev", g.disk+strconv.FormatInt(part, 10)), sb, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (g *ext4Disk) fsBlocks(part int64) (int64, error) {
	b, err := os.ReadFile(filepath.Join(g.root, "dev", g.disk+strconv.FormatInt(part, 10)))
	if err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	return int64(le.Uint32(b[1024+ext4BlocksLo:])) | int64(le.Uint32(b[1024+ext4BlocksHi:]))<<32, nil
}

// sgdisk imitates gdisk's sgdisk (sgdisk.cc, gptcl.cc GPTDataCL::DoOptions). -i N prints
// the entry as GPTPart::ShowDetails does (gptpart.cc; GPTData::ShowPartDetails says
// "Partition #N does not exist." and exits 0 for an empty slot). The other options apply in
// the order given: --move-second-header (GPTData::MoveSecondHeaderToEnd) moves the backup
// header to the disk's last sector, --new=N:START:0 ends at the last usable sector before
// the backup array as it is then, so given before the move it cannot grow.
func (g *ext4Disk) sgdisk(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"sgdisk"}, args...)
	if len(args) == 3 && args[0] == "-i" {
		n, _ := strconv.ParseInt(args[1], 10, 64)
		e := g.entries[n]
		if e == nil {
			return []byte(fmt.Sprintf("Partition #%d does not exist.\n", n)), nil
		}
		gib := func(s int64) string { return fmt.Sprintf("%.1f GiB", float64(s)/(1<<21)) }
		return []byte(fmt.Sprintf("Partition GUID code: %s (Linux filesystem)\nPartition unique GUID: %s\nFirst sector: %d (at %s)\nLast sector: %d (at %s)\nPartition size: %d sectors (%s)\nAttribute flags: %s\nPartition name: '%s'\n",
			e.typeGUID, e.guid, e.first, gib(e.first), e.last, gib(e.last), e.last-e.first+1, gib(e.last-e.first+1), e.attrs, e.name)), nil
	}
	if args[len(args)-1] != "/dev/"+g.disk {
		return nil, fail(argv, 2, "Problem opening "+args[len(args)-1]+" for reading! Error is 2.\n")
	}
	var cur *gptEntryState
	for _, a := range args[:len(args)-1] {
		k, v, _ := strings.Cut(a, "=")
		fields := strings.SplitN(v, ":", 3)
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "--move-second-header":
			g.backupAt = g.sectors - 1
		case "--delete":
			delete(g.entries, n)
		case "--new":
			first, _ := strconv.ParseInt(fields[1], 10, 64)
			cur = &gptEntryState{typeGUID: "0FC63DAF-8483-4772-8E79-3D69D8477DE4", guid: "R4ND0M00-0000-0000-0000-000000000000", attrs: "0000000000000000", first: first, last: g.backupAt - 33}
			g.entries[n] = cur
		case "--typecode":
			cur.typeGUID = fields[1]
		case "--partition-guid":
			cur.guid = fields[1]
		case "--attributes":
			cur.attrs = fields[2]
		case "--change-name":
			cur.name = fields[1]
		default:
			return nil, fail(argv, 1, "unknown option "+a+"\n")
		}
	}
	// The disk is in use (the partition is mounted), so the re-read that sgdisk asks for
	// after writing fails; it warns and still succeeds (diskio-unix.cc DiskIO::DiskSync).
	return []byte("Warning: The kernel is still using the old partition table.\nThe new table will be used at the next reboot or after you\nrun partprobe(8) or kpartx(8)\nThe operation has completed successfully.\n"), nil
}

// resize imitates the kernel's BLKPG_RESIZE_PARTITION (block/ioctl.c blkpg_do_ioctl,
// block/partitions/core.c bdev_resize_partition): the start must not move (EINVAL), the
// partition must stay inside the disk and off the others (EBUSY); then sysfs shows the
// new size.
func (g *ext4Disk) resize(_ context.Context, disk string, number int, start, sectors int64) error {
	if disk != filepath.Join(g.root, "dev", g.disk) {
		return syscall.ENOTTY
	}
	have, err := readInts(filepath.Dir(g.sysfs(int64(number), "start")), "start")
	if err != nil {
		return syscall.ENXIO
	}
	if have[0] != start || start+sectors > g.sectors {
		return syscall.EINVAL
	}
	return os.WriteFile(g.sysfs(int64(number), "size"), []byte(strconv.FormatInt(sectors, 10)+"\n"), 0o644)
}

// resize2fs imitates e2fsprogs' resize2fs DEVICE on a mounted ext4 (resize/main.c: online
// resize to the partition's size as the kernel shows it, rounded down to whole 4 KiB
// pages; "Nothing to do!" and exit 0 when the file system already fills it).
func (g *ext4Disk) resize2fs(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"resize2fs"}, args...)
	n, err := strconv.ParseInt(strings.TrimPrefix(args[len(args)-1], "/dev/"+g.disk), 10, 64)
	if len(args) != 1 || err != nil {
		return nil, fail(argv, 1, "resize2fs: No such file or directory while trying to open "+args[len(args)-1]+"\nCouldn't find valid filesystem superblock.\n")
	}
	size, err := readInts(filepath.Dir(g.sysfs(n, "size")), "size")
	if err != nil {
		return nil, err
	}
	blocks, err := g.fsBlocks(n)
	if err != nil {
		return nil, err
	}
	want := size[0] / 8
	if want <= blocks {
		return []byte(fmt.Sprintf("The filesystem is already %d (4k) blocks long.  Nothing to do!\n\n", blocks)), nil
	}
	b, _ := os.ReadFile(filepath.Join(g.root, "dev", g.disk+strconv.FormatInt(n, 10)))
	binary.LittleEndian.PutUint32(b[1024+ext4BlocksLo:], uint32(want))
	binary.LittleEndian.PutUint32(b[1024+ext4BlocksHi:], uint32(want>>32))
	if err := os.WriteFile(filepath.Join(g.root, "dev", g.disk+strconv.FormatInt(n, 10)), b, 0o644); err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf("Filesystem at /dev/%s%d is mounted on /var/lib/containers; on-line resizing required\nold_desc_blocks = 1, new_desc_blocks = 1\nThe filesystem on /dev/%s%d is now %d (4k) blocks long.\n\n", g.disk, n, g.disk, n, want)), nil
}

// On the conformance OS the seed's last partition, ext4 /var/lib/containers, takes a disk
// twice the seed's at the site's first boot, found without udev by its GPT name; the entry
// keeps its GUIDs, attributes and name, the kernel learns the new size, the file system
// grows to the partition's end, and the details give both sizes before and after.
func TestGrowExt4ContainerStorage(t *testing.T) {
	const seed = 2 << 21 // a 2 GiB seed disk, in sectors
	const csStart = seed - 64*2048
	first := [][3]int64{{1, 2048, 16384}, {2, 18432, csStart - 18432}}
	tests := []struct {
		name     string
		sectors  int64
		parts    [][3]int64
		noUdev   bool
		wantCmds []string
		grown    string
	}{
		{"twice the seed, no udev", 2 * seed, append(first, [3]int64{5, csStart, seed - 33 - csStart}), true,
			[]string{"sgdisk -i 5 /dev/vda",
				"sgdisk --move-second-header --delete=5 --new=5:" + strconv.Itoa(csStart) + ":0 --typecode=5:0FC63DAF-8483-4772-8E79-3D69D8477DE4 --partition-guid=5:6B7F3C54-1D52-4E47-9A4B-0C2E5A9D7B11 --attributes=5:=:0000000000000000 --change-name=5:var-lib-containers /dev/vda",
				"sgdisk -i 5 /dev/vda", "resize2fs /dev/vda5"}, "by "},
		{"twice the seed, with udev", 2 * seed, append(first, [3]int64{5, csStart, seed - 33 - csStart}), false, nil, "by "},
		{"the seed's size", seed, append(first, [3]int64{5, csStart, seed - 33 - csStart}), true, []string{"resize2fs /dev/vda5"}, "no room"},
		{"not the last partition", 2 * seed, append(first, [3]int64{5, csStart, 2048}, [3]int64{6, csStart + 2048, 2048}), true, nil, "not the last partition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			g := &ext4Disk{fakeDisk: fakeDisk{root: h.root, disk: "vda", sectors: tc.sectors, parts: tc.parts, noUdev: tc.noUdev}, backupAt: seed - 1,
				entries: map[int64]*gptEntryState{}}
			g.write(t, "var-lib-containers", 5)
			for _, p := range tc.parts {
				g.entries[p[0]] = &gptEntryState{typeGUID: "0FC63DAF-8483-4772-8E79-3D69D8477DE4", guid: "6B7F3C54-1D52-4E47-9A4B-0C2E5A9D7B1" + strconv.FormatInt(p[0]-4, 10),
					attrs: "0000000000000000", name: "part" + strconv.FormatInt(p[0], 10), first: p[1], last: p[1] + p[2] - 1}
			}
			g.entries[5].name = "var-lib-containers"
			g.writeExt4(t, 5, tc.parts[2][2]/8)
			h.cmds.tools["sgdisk"], h.cmds.tools["resize2fs"] = g.sgdisk, g.resize2fs
			if err := writeFile(filepath.Join(h.root, ContainerStorageMountFile), []byte("[Unit]\nRequires=systemd-fsck@dev-disk-by\\x2dpartlabel-var\\x2dlib\\x2dcontainers.service\n\n[Mount]\nWhere=/var/lib/containers\nWhat=/dev/disk/by-partlabel/var-lib-containers\nType=ext4\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			o := h.options(oskind.CoreOS, "")
			o.ResizePartition = g.resize
			d, err := (&run{o: o}).growExt4ContainerStorage(context.Background(), nil)
			if err != nil {
				t.Fatalf("%v (commands %q)", err, h.cmds.lines)
			}
			if tc.wantCmds != nil && !slices.Equal(h.cmds.lines, tc.wantCmds) {
				t.Errorf("commands\n%s\nwant\n%s", strings.Join(h.cmds.lines, "\n"), strings.Join(tc.wantCmds, "\n"))
			}
			if !strings.Contains(d["grown"], tc.grown) {
				t.Errorf("grown %q, want ...%s...", d["grown"], tc.grown)
			}
			if tc.grown != "by " {
				return
			}
			e := g.entries[5]
			if e.last != tc.sectors-34 || e.guid != "6B7F3C54-1D52-4E47-9A4B-0C2E5A9D7B11" || e.name != "var-lib-containers" || e.first != csStart {
				t.Errorf("GPT entry 5 %+v, want it from %d to the last usable sector %d with its GUID and name", *e, csStart, tc.sectors-34)
			}
			end := strconv.FormatInt(tc.sectors-33-csStart, 10)
			fsBytes := strconv.FormatInt((tc.sectors-33-csStart)/8*4096, 10)
			if d["partition_sectors_after"] != end || d["fs_bytes_after"] != fsBytes || d["partition_sectors_before"] != strconv.FormatInt(seed-33-csStart, 10) ||
				d["fs_bytes_before"] != strconv.FormatInt((seed-33-csStart)/8*4096, 10) || d["disk_sectors"] != strconv.FormatInt(tc.sectors, 10) {
				t.Errorf("details %v, want the partition %s sectors and the file system %s bytes after", d, end, fsBytes)
			}
		})
	}
}

// A pass cut off after sgdisk changed the table but before the kernel learnt of it: the
// next pass re-creates the same entry, tells the kernel, and grows the file system.
func TestGrowExt4AfterCutOff(t *testing.T) {
	const seed, csStart = 2 << 21, 2<<21 - 64*2048
	h := newHarness(t)
	g := &ext4Disk{fakeDisk: fakeDisk{root: h.root, disk: "vda", sectors: 2 * seed, parts: [][3]int64{{5, csStart, seed - 33 - csStart}}, noUdev: true},
		backupAt: 2*seed - 1, entries: map[int64]*gptEntryState{5: {typeGUID: "0FC63DAF-8483-4772-8E79-3D69D8477DE4", guid: "6B7F3C54-1D52-4E47-9A4B-0C2E5A9D7B11",
			attrs: "0000000000000000", name: "var-lib-containers", first: csStart, last: 2*seed - 34}}}
	g.write(t, "var-lib-containers", 5)
	g.writeExt4(t, 5, (seed-33-csStart)/8)
	h.cmds.tools["sgdisk"], h.cmds.tools["resize2fs"] = g.sgdisk, g.resize2fs
	if err := writeFile(filepath.Join(h.root, ContainerStorageMountFile), []byte("[Mount]\nWhat=/dev/disk/by-partlabel/var-lib-containers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := h.options(oskind.CoreOS, "")
	o.ResizePartition = g.resize
	d, err := (&run{o: o}).growExt4ContainerStorage(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(2*seed-33-csStart, 10); d["partition_sectors_after"] != want {
		t.Errorf("partition %s sectors after the second pass, want %s (%v)", d["partition_sectors_after"], want, d)
	}
}

// The stand-in sgdisk's order matters as sgdisk's does: re-creating the partition before
// the backup header moves leaves it where it was.
func TestSgdiskNewBeforeMoveCannotGrow(t *testing.T) {
	g := &ext4Disk{fakeDisk: fakeDisk{disk: "vda", sectors: 8 << 21}, backupAt: 4<<21 - 1, entries: map[int64]*gptEntryState{}}
	if _, err := g.sgdisk(nil, []string{"--new=5:2048:0", "--move-second-header", "/dev/vda"}); err != nil {
		t.Fatal(err)
	}
	if g.entries[5].last != 4<<21-34 {
		t.Errorf("--new before --move-second-header ended at %d", g.entries[5].last)
	}
}
