package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
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

// TestContainerStoragePartition builds the demo with a separate /var/lib/containers
// partition (-64M on its 2 GiB disk) through validate, under TCG, booting from disk with
// either firmware (BIOS through gptmbr.bin, UEFI through the ESP's GRUB): the installed disk
// is GPT with partition 5 named var-lib-containers from 64 MiB before the end to the last
// usable sector, the precached images are on it and not on the root, and validate found
// them there (the boot from disk mounted it).
func TestContainerStoragePartition(t *testing.T) {
	t.Parallel()
	for _, fw := range []string{"bios", "uefi"} {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			checkContainerStorageInstall(t, fw)
		})
	}
}

func checkContainerStorageInstall(t *testing.T, firmware string) {
	bp := demoBlueprint(t)
	withFirmware(t, bp, firmware)
	editBlueprint(t, bp, "  relocation:\n", "  disk:\n    containerStorage: {start: -64M}\n"+
		"  validation:\n    skip: [host.time.sync]\n    skipReasons:\n      host.time.sync: the conformance OS keeps no NTP client\n  relocation:\n")
	cache, out := t.TempDir(), t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "validate", "--cache-dir", cache, "--output-dir", out, "--progress", "plain"); r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
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
}
