package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// gptEntry is one partition as the GPT says, read here by this test (UEFI spec 2.10
// §5.3), not by the tool that wrote it.
type gptEntry struct {
	first, last uint64
	attrs       uint64
	name        string
	guid        string
}

// guid is a GPT GUID's text: its first three fields are stored little-endian.
func guid(b []byte) string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(b[0:4]), le.Uint16(b[4:6]), le.Uint16(b[6:8]), b[8:10], b[10:16])
}

// readGPTDiskGUID is the disk GUID of img's primary GPT header.
func readGPTDiskGUID(t *testing.T, img string) string {
	t.Helper()
	return guid(diskHead(t, img)[512+56 : 512+72])
}

// readGPT reads the primary GPT of img: the last usable LBA and the used entries by number.
func readGPT(t *testing.T, img string) (lastUsable uint64, parts map[int]gptEntry) {
	t.Helper()
	b := diskHead(t, img)
	h := b[512:1024]
	if string(h[:8]) != "EFI PART" {
		t.Fatalf("%s has no GPT header at LBA 1", img)
	}
	lastUsable = binary.LittleEndian.Uint64(h[48:56])
	entries, n, size := binary.LittleEndian.Uint64(h[72:80]), binary.LittleEndian.Uint32(h[80:84]), binary.LittleEndian.Uint32(h[84:88])
	parts = map[int]gptEntry{}
	for i := range n {
		e := b[entries*512+uint64(i*size):][:size]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		u := make([]uint16, 36)
		for j := range u {
			u[j] = binary.LittleEndian.Uint16(e[56+2*j:])
		}
		name := strings.TrimRight(string(utf16.Decode(u)), "\x00")
		parts[int(i)+1] = gptEntry{binary.LittleEndian.Uint64(e[32:40]), binary.LittleEndian.Uint64(e[40:48]), binary.LittleEndian.Uint64(e[48:56]), name, guid(e[16:32])}
	}
	return lastUsable, parts
}

// diskHead is the first 64 KiB of img: the protective MBR, the GPT header and its entries.
func diskHead(t *testing.T, img string) []byte {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// runPartitionGPT runs init.sh's partition_gpt section under busybox's sh with the host's
// sgdisk, as the installer does, on a file of diskMiB with the request req; mount, wait_for
// and partition are stand-ins (a file has no partition devices), so container_storage_target
// writes its mount unit under root.
func runPartitionGPT(t *testing.T, img string, diskMiB int, req wire.InstallRequest, root string) error {
	t.Helper()
	s := string(initScript)
	begin, end := strings.Index(s, "# ---- partition_gpt ----"), strings.Index(s, "# ---- end of partition_gpt ----")
	if begin < 0 || end < begin {
		t.Fatal("init.sh has no partition_gpt section")
	}
	dir := t.TempDir()
	b, err := wire.EncodeInstallRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	reqPath := filepath.Join(dir, "request.img")
	if err := os.WriteFile(reqPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(int64(diskMiB) << 20)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	section := strings.ReplaceAll(s[begin:end], "/run/snofactory", dir)
	// mke2fs records its arguments and time in root/mke2fs.args.
	script := "log() { :; }\ndie() { echo \"$1\" >&2; [ -n \"$2\" ] && cat \"$2\" >&2; exit 1; }\n" +
		"mount() { :; }\nwait_for() { :; }\npartition() { echo \"$1-part$2\"; }\n" +
		"MKE2FS_ARGS=\"$3/mke2fs.args\"\nrecord_mke2fs() { echo \"time=$E2FSPROGS_FAKE_TIME $*\" >\"$MKE2FS_ARGS\"; }\n" +
		"ROOT_LABEL_DEFAULT=" + RootLabel + "\nSGDISK=" + sgdiskBin.src + "\nGPTMBR=" + gptmbrBin.src + "\nMKE2FS=record_mke2fs\n" +
		"ESP_END_MIB=" + strconv.Itoa(1+ESPMiB) + "\nMIN_ROOT_END_MIB=" + strconv.Itoa(MinDiskMiB) + "\n" +
		section + "\ncontainer_storage_request \"$2\"\npartition_gpt \"$1\"\ncontainer_storage_target \"$1\" \"$3\"\n"
	cmd := exec.Command(busyboxBin.src, "sh", "-c", script, "sh", img, reqPath, root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &mkfsError{err, stderr.String()}
	}
	return nil
}

// A blueprint's container-storage partition makes the installed disk GPT: the ESP and the
// root where the MBR layout has them, the root marked legacy BIOS bootable for syslinux's
// gptmbr.bin (which the protective MBR carries, with the installed-disk mark), and
// partition N named L from the requested start to the disk's last usable sector; its mount
// unit is the one RHCOS's Ignition writes (Butane with_mount_unit).
func TestPartitionGPT(t *testing.T) {
	if _, err := os.Stat(sgdiskBin.src); err != nil {
		t.Skipf("no sgdisk (Debian package %s): %v", sgdiskBin.pkg, err)
	}
	u, h := wire.FSIdentity("sha256:gpt")
	for _, tc := range []struct {
		name           string
		number         int
		label          string
		startMiB, disk int
		want           string // an error's text; "" when it installs
	}{
		{"demo-like", 5, "var-lib-containers", 448, 512, ""},
		{"third partition", 3, "containers", 300, 1024, ""},
		{"inside the root", 5, "var-lib-containers", 200, 512, "inside the ESP and the root"},
		{"past the disk", 5, "var-lib-containers", 600, 512, "partitioning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, root := filepath.Join(t.TempDir(), "disk.img"), t.TempDir()
			ids := wire.NewGPTIdentity("sha256:gpt")
			req := wire.InstallRequest{RootUUID: u, HashSeed: h, MkfsTime: 1700000000, GPT: ids,
				ContainerStorage: &wire.InstallPartition{Number: tc.number, Label: tc.label, StartMiB: int64(tc.startMiB)}}
			err := runPartitionGPT(t, img, tc.disk, req, root)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("partition_gpt = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			last, parts := readGPT(t, img)
			want := map[int]gptEntry{
				1:         {2048, (1+ESPMiB)*2048 - 1, 0, "EFI-SYSTEM", ids.ESP},
				2:         {(1 + ESPMiB) * 2048, uint64(tc.startMiB)*2048 - 1, 1 << 2, RootLabel, ids.Root},
				tc.number: {uint64(tc.startMiB) * 2048, last, 0, tc.label, ids.ContainerStorage},
			}
			// One lock, one layout: the GUIDs and the file system's identity are the request's.
			if got := readGPTDiskGUID(t, img); got != ids.Disk {
				t.Errorf("disk GUID %s, want the request's %s", got, ids.Disk)
			}
			args, err := os.ReadFile(filepath.Join(root, "mke2fs.args"))
			if want := "time=1700000000 -F -q -t ext4 -L " + tc.label + " -U " + ids.FSUUID + " -E hash_seed=" + ids.FSHashSeed + " "; err != nil || !strings.HasPrefix(string(args), want) {
				t.Errorf("mke2fs ran with %q (%v), want %q...", args, err, want)
			}
			if len(parts) != len(want) {
				t.Fatalf("partitions %+v, want %+v", parts, want)
			}
			for n, w := range want {
				if parts[n] != w {
					t.Errorf("partition %d = %+v, want %+v", n, parts[n], w)
				}
			}
			disk := diskHead(t, img)
			code, _ := os.ReadFile(gptmbrBin.src)
			if !bytes.Equal(disk[:len(code)], code) || string(disk[440:444]) != DiskSignature || disk[450] != 0xee {
				t.Errorf("sector 0 is not gptmbr.bin, %q and a protective entry: % x", DiskSignature, disk[440:452])
			}
			unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/var-lib-containers.mount"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{"What=/dev/disk/by-partlabel/" + tc.label, "Where=/var/lib/containers", "Type=ext4",
				`Requires=systemd-fsck@dev-disk-by\x2dpartlabel-` + strings.ReplaceAll(tc.label, "-", `\x2d`) + ".service", "RequiredBy=local-fs.target"} {
				if !strings.Contains(string(unit), line+"\n") {
					t.Errorf("the mount unit has no %q:\n%s", line, unit)
				}
			}
		})
	}
}
