package reconfigure

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// A fake disk under the harness root, as udev and the kernel show it: the by-partlabel link
// (udev's 60-persistent-storage.rules, relative to /dev), and sysfs's block directories
// (Documentation/ABI/testing/sysfs-block: a partition's directory inside its disk's, with
// partition, start and size in 512-byte sectors; /sys/class/block/NAME links to it).
type fakeDisk struct {
	root, disk string
	sectors    int64
	parts      [][3]int64 // number, start, size
	// noUdev: no by-partlabel links (the conformance OS's initramfs); the partitions'
	// uevent files still carry their GPT names (block/partitions/core.c part_uevent).
	noUdev bool
}

func (f fakeDisk) write(t *testing.T, label string, labelled int) {
	t.Helper()
	dev := filepath.Join(f.root, "dev")
	diskDir := filepath.Join(f.root, "sys/devices/pci0000:00/0000:00:04.0/virtio2/block", f.disk)
	mk := func(p, v string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(diskDir, "size"), strconv.FormatInt(f.sectors, 10))
	for _, p := range f.parts {
		name := f.disk + strconv.FormatInt(p[0], 10)
		mk(filepath.Join(diskDir, name, "partition"), strconv.FormatInt(p[0], 10))
		mk(filepath.Join(diskDir, name, "start"), strconv.FormatInt(p[1], 10))
		mk(filepath.Join(diskDir, name, "size"), strconv.FormatInt(p[2], 10))
		mk(filepath.Join(dev, name), "")
		rel, _ := filepath.Rel(filepath.Join(f.root, "sys/class/block"), filepath.Join(diskDir, name))
		link(rel, filepath.Join(f.root, "sys/class/block", name))
		partName := "part" + strconv.FormatInt(p[0], 10)
		if int(p[0]) == labelled {
			partName = label
		}
		mk(filepath.Join(diskDir, name, "uevent"), fmt.Sprintf("MAJOR=254\nMINOR=%d\nDEVNAME=%s\nDEVTYPE=partition\nDISKSEQ=9\nPARTN=%d\nPARTNAME=%s", p[0], name, p[0], partName))
		if int(p[0]) == labelled && !f.noUdev {
			link("../../"+name, filepath.Join(dev, "disk/by-partlabel", label))
		}
	}
}

// gptDisk is the stand-ins' view of the disk: where the backup GPT header is, and the
// partitions' sysfs files, which growpart changes as the kernel would after its resize.
type gptDisk struct {
	fakeDisk
	backupAt int64 // sector of the backup GPT header
	xfsGrown bool
}

func (g *gptDisk) sysfs(part int64, file string) string {
	return filepath.Join(g.root, "sys/class/block", g.disk+strconv.FormatInt(part, 10), file)
}

// tools are the stand-ins for the disk tools the grow step runs.
func (g *gptDisk) tools() map[string]tool {
	return map[string]tool{
		// sgdisk imitates gdisk's sgdisk -e (sgdisk.cc, --move-second-header: GPTData::
		// MoveSecondHeaderToEnd), which moves the backup header and partition array to the
		// disk's last sectors and says nothing on success.
		"sgdisk": func(c *commands, args []string) ([]byte, error) {
			if !slices.Equal(args, []string{"-e", "/dev/" + g.disk}) {
				return nil, fail(append([]string{"sgdisk"}, args...), 2, "Problem opening "+strings.Join(args, " ")+" for reading! Error is 2.\n")
			}
			g.backupAt = g.sectors - 1
			return nil, nil
		},
		// growpart imitates cloud-utils' growpart DISK N (bin/growpart): it refuses to grow
		// past a backup GPT header that is not at the disk's end (sfdisk then sees no free
		// space: "NOCHANGE ... it cannot be grown", exit 1), else it takes the space up to
		// the backup array, prints CHANGED on stdout and tells the kernel (partx), whose sysfs
		// then shows the new size.
		"growpart": func(c *commands, args []string) ([]byte, error) {
			argv := append([]string{"growpart"}, args...)
			if len(args) != 2 || args[0] != "/dev/"+g.disk {
				return nil, fail(argv, 2, "FAILED: "+strings.Join(args, " ")+": not a disk\n")
			}
			n, _ := strconv.ParseInt(args[1], 10, 64)
			start, _ := readInts(filepath.Dir(g.sysfs(n, "start")), "start", "size")
			if start == nil {
				return nil, fail(argv, 2, fmt.Sprintf("FAILED: partition %d not found\n", n))
			}
			end := g.backupAt - 32
			if end-start[0] <= start[1] {
				return nil, fail(argv, 1, "")
			}
			if err := os.WriteFile(g.sysfs(n, "size"), []byte(strconv.FormatInt(end-start[0], 10)+"\n"), 0o644); err != nil {
				return nil, err
			}
			return []byte(fmt.Sprintf("CHANGED: partition=%d start=%d old: size=%d end=%d new: size=%d end=%d\n", n, start[0], start[1], start[0]+start[1], end-start[0], end)), nil
		},
		// xfs_growfs imitates xfsprogs' xfs_growfs MOUNTPOINT (growfs/xfs_growfs.c): it
		// prints the geometry, then "data blocks changed from X to Y" only when it grew
		// something (a full file system is no error); it needs a mount point.
		"xfs_growfs": func(c *commands, args []string) ([]byte, error) {
			if !slices.Equal(args, []string{ContainerStoragePath}) {
				return nil, fail(append([]string{"xfs_growfs"}, args...), 1, "xfs_growfs: "+strings.Join(args, " ")+" is not a mounted XFS filesystem\n")
			}
			geometry := "meta-data=/dev/vda5 isize=512 agcount=4, agsize=2621440 blks\n"
			if g.xfsGrown = g.backupAt == g.sectors-1 && g.sectors > 120<<21; !g.xfsGrown {
				return []byte(geometry), nil
			}
			return []byte(geometry + "data blocks changed from 10485760 to 20971520\n"), nil
		},
	}
}

// The seed's last partition, /var/lib/containers, takes a disk twice the seed's at the
// site's first boot: the backup GPT moves to the end first, then the partition and the
// file system grow. A seed on a disk of its own size, a node without the partition and a
// partition that is not last are left alone.
func TestGrowContainerStorage(t *testing.T) {
	const seed = 120 << 21 // a 120 GiB seed disk, in sectors
	rhcos := [][3]int64{{1, 2048, 2048}, {2, 4096, 260096}, {3, 264192, 786432}, {4, 1050624, 166721536}}
	tests := []struct {
		name     string
		sectors  int64
		parts    [][3]int64
		unit     bool
		wantCmds []string
		grown    string
	}{
		{"twice the seed", 2 * seed, append(rhcos, [3]int64{5, 167772160, seed - 33 - 167772160}), true,
			[]string{"sgdisk -e /dev/vda", "growpart /dev/vda 5", "xfs_growfs /var/lib/containers"}, "by "},
		// Also a pass after one cut off past growpart: the file system still grows.
		{"the seed's size", seed, append(rhcos, [3]int64{5, 167772160, seed - 33 - 167772160}), true, []string{"xfs_growfs /var/lib/containers"}, "no room"},
		{"not the last partition", 2 * seed, append(rhcos, [3]int64{5, 167772160, 1 << 20}, [3]int64{6, 167772160 + 1<<20, 2048}), true, nil, "not the last partition"},
		{"no partition", 2 * seed, rhcos, false, nil, "on the root file system"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			g := &gptDisk{fakeDisk: fakeDisk{root: h.root, disk: "vda", sectors: tc.sectors, parts: tc.parts}, backupAt: seed - 1}
			g.write(t, "var-lib-containers", 5)
			for k, v := range g.tools() {
				h.cmds.tools[k] = v
			}
			if tc.unit {
				unit := "# Generated by Butane\n[Unit]\nRequires=systemd-fsck@dev-disk-by\\x2dpartlabel-var\\x2dlib\\x2dcontainers.service\n\n[Mount]\nWhere=/var/lib/containers\nWhat=/dev/disk/by-partlabel/var-lib-containers\nType=xfs\nOptions=defaults,prjquota\n\n[Install]\nRequiredBy=local-fs.target\n"
				if err := writeFile(filepath.Join(h.root, ContainerStorageMountFile), []byte(unit), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := &run{o: h.options(oskind.OpenShift, "")}
			d, err := r.growContainerStorage(context.Background(), nil)
			if err != nil {
				t.Fatalf("%v (commands %q)", err, h.cmds.lines)
			}
			if !slices.Equal(h.cmds.lines, tc.wantCmds) {
				t.Errorf("commands %q, want %q", h.cmds.lines, tc.wantCmds)
			}
			if !strings.Contains(d["grown"], tc.grown) {
				t.Errorf("grown %q, want ...%s...", d["grown"], tc.grown)
			}
			if len(tc.wantCmds) < 3 {
				return
			}
			size, _ := readInts(filepath.Dir(g.sysfs(5, "size")), "start", "size")
			if end := size[0] + size[1]; end != tc.sectors-gptTail || !g.xfsGrown {
				t.Errorf("partition 5 ends at sector %d of %d (backup GPT at %d), xfs grown %v", end, tc.sectors, g.backupAt, g.xfsGrown)
			}
		})
	}
}

// Without moving the backup GPT first, growpart finds no room: the step's order matters.
func TestGrowpartNeedsBackupGPTMoved(t *testing.T) {
	h := newHarness(t)
	const seed = 120 << 21
	g := &gptDisk{fakeDisk: fakeDisk{root: h.root, disk: "vda", sectors: 2 * seed, parts: [][3]int64{{5, 167772160, seed - 33 - 167772160}}}, backupAt: seed - 1}
	g.write(t, "var-lib-containers", 5)
	if _, err := g.tools()["growpart"](h.cmds, []string{"/dev/vda", "5"}); err == nil {
		t.Error("growpart grew a partition past the backup GPT header")
	}
}
