package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/test/testbin"
)

// gptPartition is one used GPT entry, read by this test (UEFI spec 2.10 §5.3).
type gptPartition struct {
	first, last uint64
	name        string
}

// readGPTPartitions reads the primary GPT of a raw disk: its used entries by number and the
// last usable LBA.
func readGPTPartitions(t *testing.T, raw string) (map[int]gptPartition, uint64) {
	t.Helper()
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 34*512)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatal(err)
	}
	h := b[512:1024]
	if string(h[:8]) != "EFI PART" {
		t.Fatalf("the installed disk has no GPT: sector 1 starts %q", h[:8])
	}
	lba, n, size := binary.LittleEndian.Uint64(h[72:80]), binary.LittleEndian.Uint32(h[80:84]), binary.LittleEndian.Uint32(h[84:88])
	parts := map[int]gptPartition{}
	for i := range n {
		e := b[lba*512+uint64(i*size):][:size]
		if binary.LittleEndian.Uint64(e[0:8]) == 0 && binary.LittleEndian.Uint64(e[8:16]) == 0 {
			continue
		}
		u := make([]uint16, 36)
		for j := range u {
			u[j] = binary.LittleEndian.Uint16(e[56+2*j:])
		}
		parts[int(i)+1] = gptPartition{binary.LittleEndian.Uint64(e[32:40]), binary.LittleEndian.Uint64(e[40:48]),
			strings.TrimRight(string(utf16.Decode(u)), "\x00")}
	}
	return parts, binary.LittleEndian.Uint64(h[48:56])
}

// extractPartition copies a partition of raw into its own file, for debugfs.
func extractPartition(t *testing.T, raw string, p gptPartition) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), fmt.Sprintf("part-%d.img", p.first))
	cmd := exec.Command("dd", "if="+raw, "of="+out, "bs=512", fmt.Sprintf("skip=%d", p.first), fmt.Sprintf("count=%d", p.last-p.first+1), "conv=sparse")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, b)
	}
	return out
}

// debugfsLs lists a directory of an ext2/3/4 image with e2fsprogs' debugfs, a reader
// independent of the kernel that wrote it.
func debugfsLs(t *testing.T, img, dir string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "ls -l "+dir, img).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs ls %s: %v: %s", dir, err, out)
	}
	return string(out)
}

// containerStorageEdit is the blueprint edit for a separate /var/lib/containers partition
// 64 MiB before the end of the demo's 2 GiB disk, with validate skipping the one check the
// conformance OS cannot pass.
var containerStorageEdit = [2]string{"  relocation:\n", "  disk:\n    containerStorage: {start: -64M}\n" +
	"  validation:\n    skip: [host.time.sync]\n    skipReasons:\n      host.time.sync: the conformance OS keeps no NTP client\n  relocation:\n"}

// TestContainerStoragePartition builds the demo with a separate /var/lib/containers
// partition (containerStorageEdit) under TCG, booting BIOS (through gptmbr.bin), and
// checks its installed disk (checkContainerStorageDisk); the build goes on to the seal and
// the site: the seed written to a disk twice its size uses the whole disk after its first
// boot there. The UEFI boot of the same layout (through the ESP's GRUB) is checked on
// TestDemoInstallsAndValidates's install, which boots UEFI anyway: an install of its own
// here cost two more VM boots under TCG.
func TestContainerStoragePartition(t *testing.T) {
	t.Parallel()
	bp := demoBlueprint(t)
	withFirmware(t, bp, "bios")
	editBlueprint(t, bp, containerStorageEdit[0], containerStorageEdit[1])
	cache, out := t.TempDir(), t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "seal", "--cache-dir", cache, "--output-dir", out, "--progress", "plain"); r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	checkContainerStorageSite(t, filepath.Join(out, "seal", "seed"), checkContainerStorageDisk(t, out))
}

// checkContainerStorageDisk checks the install in out of a blueprint with
// containerStorageEdit: the installed disk is GPT with partition 5 named
// var-lib-containers from 64 MiB before the end to the last usable sector, the precached
// images are on it and not on the root, and validate found them there (the boot from disk
// mounted it). It returns the partition's first sector.
func checkContainerStorageDisk(t *testing.T, out string) uint64 {
	t.Helper()
	cases := junitCases(t, filepath.Join(out, "validation.junit.xml"))
	if c := cases["host.images.present"]; c.Skipped != nil || c.Failure != nil {
		t.Errorf("host.images.present did not pass: %+v", c)
	}
	raw := filepath.Join(t.TempDir(), "disk.raw")
	if b, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(out, "install", "disk.qcow2"), raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, b)
	}
	parts, last := readGPTPartitions(t, raw)
	const diskSectors, csSectors = 2 << 30 / 512, 64 << 20 / 512
	cs, ok := parts[5]
	if !ok || cs.name != "var-lib-containers" || cs.first != diskSectors-csSectors || cs.last != last {
		t.Fatalf("partition 5 = %+v (present %v), want var-lib-containers from sector %d to %d; all: %+v", cs, ok, diskSectors-csSectors, last, parts)
	}
	root, ok := parts[2]
	if !ok || root.last != cs.first-1 {
		t.Fatalf("root partition %+v, want it to end before the container storage at %d", root, cs.first)
	}
	if ls := debugfsLs(t, extractPartition(t, raw, cs), "/storage/vfs-images"); !strings.Contains(ls, "images.json") {
		t.Errorf("the container-storage partition holds no image store:\n%s", ls)
	}
	if ls := debugfsLs(t, extractPartition(t, raw, root), "/root/var/lib/containers"); strings.Contains(ls, "storage") {
		t.Errorf("the root's /var/lib/containers (under the mount) has the images too:\n%s", ls)
	}
	return cs.first
}

func checkContainerStorageSite(t *testing.T, sealed string, csStart uint64) {
	m, err := seed.ReadManifest(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if m.SiteFit == nil || m.SiteFit.ContainerStorageLabel != "var-lib-containers" {
		t.Errorf("the seed's siteFit %+v records no container-storage label", m.SiteFit)
	}
	dir := t.TempDir()
	raw, overlay, iso := filepath.Join(dir, "site.raw"), filepath.Join(dir, "site.qcow2"), filepath.Join(dir, "site.iso")
	if r := runCLI(t, "seed", "write", "--image", sealed, "--device", raw); r.code != 0 {
		t.Fatalf("seed write: exit %d\n%s", r.code, r.stderr)
	}
	const seedSectors = 2 << 30 / 512
	const diskSectors = 2 * seedSectors
	if err := os.Truncate(raw, diskSectors*512); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", raw, overlay).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, b)
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "site-config", "create", filepath.Join(root, "blueprints", "demo", "site.yaml"), "-o", iso); r.code != 0 {
		t.Fatalf("site-config create: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, "seed", "boot", sealed, "--overlay", overlay, "--site-config", iso)
	if r.code != 0 {
		t.Fatalf("seed boot: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	detail := func(key string) uint64 {
		t.Helper()
		m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("the container-storage step reported no %s:\n%s", key, r.stdout)
		}
		n, _ := strconv.ParseUint(m[1], 10, 64)
		return n
	}
	// The GPT's last usable sector is the disk's end less the backup array and header.
	lastUsable := uint64(diskSectors - 34)
	if start, before, after := detail("start_sector"), detail("partition_sectors_before"), detail("partition_sectors_after"); start != csStart ||
		start+before != seedSectors-33 || start+after-1 != lastUsable || detail("disk_sectors") != diskSectors {
		t.Errorf("partition 5 from %d: %d sectors before, %d after; want it from %d to the seed's end, then to sector %d\n%s",
			start, before, after, csStart, lastUsable, r.stdout)
	}
	if fsAfter, partBytes := detail("fs_bytes_after"), (lastUsable-csStart+1)*512; fsAfter > partBytes || partBytes-fsAfter >= 4096 || detail("fs_bytes_before") >= fsAfter {
		t.Errorf("the file system is %d bytes after (%d before), want it to end within a 4 KiB page of the partition's %d\n%s", fsAfter, detail("fs_bytes_before"), partBytes, r.stdout)
	}
	grown := filepath.Join(dir, "grown.raw")
	if b, err := exec.Command("qemu-img", "convert", "-O", "raw", overlay, grown).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, b)
	}
	parts, last := readGPTPartitions(t, grown)
	if cs := parts[5]; last != lastUsable || cs.first != csStart || cs.last != lastUsable || cs.name != "var-lib-containers" {
		t.Errorf("the site disk's GPT: last usable %d, partition 5 %+v; want var-lib-containers from %d to %d", last, cs, csStart, lastUsable)
	}
	stats, err := exec.Command("debugfs", "-R", "stats", extractPartition(t, grown, parts[5])).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs stats: %v: %s", err, stats)
	}
	count := regexp.MustCompile(`Block count:\s+(\d+)`).FindSubmatch(stats)
	size := regexp.MustCompile(`Block size:\s+(\d+)`).FindSubmatch(stats)
	if count == nil || size == nil {
		t.Fatalf("debugfs stats gave no block count and size:\n%s", stats)
	}
	c, _ := strconv.ParseUint(string(count[1]), 10, 64)
	bs, _ := strconv.ParseUint(string(size[1]), 10, 64)
	// resize2fs sizes a file system from its device in whole pages (resize/main.c: the new
	// size rounded down to sys_page_size), so it ends within 4 KiB of the partition's end.
	if partBytes := (lastUsable - csStart + 1) * 512; c*bs > partBytes || partBytes-c*bs >= 4096 {
		t.Errorf("debugfs: the file system is %d blocks of %d, want it to fill the partition's %d bytes to the last 4 KiB page", c, bs, partBytes)
	}
}
