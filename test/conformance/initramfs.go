package conformance

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// entry is one file of the initramfs: content from a host file or inline, or a symlink.
type entry struct {
	src     string
	data    []byte
	mode    os.FileMode
	symlink string
}

// tree is the initramfs being assembled, keyed by absolute path inside it.
type tree struct {
	files map[string]entry
}

func newTree() *tree { return &tree{files: map[string]entry{}} }

func (t *tree) addHost(dst, src string, mode os.FileMode) { t.files[dst] = entry{src: src, mode: mode} }
func (t *tree) addData(dst string, data []byte, mode os.FileMode) {
	t.files[dst] = entry{data: data, mode: mode}
}
func (t *tree) addLink(dst, target string) { t.files[dst] = entry{symlink: target} }

func (t *tree) paths() []string {
	ps := make([]string, 0, len(t.files))
	for p := range t.files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

func (t *tree) hash(h io.Writer) error {
	for _, p := range t.paths() {
		e := t.files[p]
		fmt.Fprintf(h, "entry %s %o %s\n", p, e.mode, e.symlink)
		switch {
		case e.src != "":
			if err := hashFile(h, e.src); err != nil {
				return err
			}
		case e.symlink == "":
			fmt.Fprintf(h, "%d\n", len(e.data))
			h.Write(e.data)
		}
	}
	return nil
}

// initramfs returns the tree as a zstd-compressed newc cpio archive: the kernel
// decompresses zstd fastest, and under TCG the BIOS loads the initrd at only a few MB/s,
// so the best ratio (with an 8 MiB window the kernel still accepts) pays for itself.
func (t *tree) initramfs() ([]byte, error) {
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(8<<20))
	if err != nil {
		return nil, err
	}
	cw := cpio.NewWriter(zw)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	var mkdirs func(string) error
	mkdirs = func(d string) error {
		if d == "/" || d == "." || dirs[d] {
			return nil
		}
		if err := mkdirs(path.Dir(d)); err != nil {
			return err
		}
		dirs[d] = true
		return cw.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(d, "/"), Mode: cpio.TypeDir | 0o755, ModTime: mtime, Links: 2})
	}
	for _, d := range []string{"/dev", "/proc", "/sys", "/run", "/tmp", "/sysroot", "/mnt", "/root", "/etc"} {
		if err := mkdirs(d); err != nil {
			return nil, err
		}
	}
	for _, p := range t.paths() {
		e := t.files[p]
		if err := mkdirs(path.Dir(p)); err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(p, "/")
		if e.symlink != "" {
			if err := cw.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeSymlink | 0o777, Linkname: e.symlink, Size: int64(len(e.symlink)), ModTime: mtime, Links: 1}); err != nil {
				return nil, err
			}
			if _, err := cw.Write([]byte(e.symlink)); err != nil {
				return nil, err
			}
			continue
		}
		data := e.data
		if e.src != "" {
			if data, err = os.ReadFile(e.src); err != nil {
				return nil, fmt.Errorf("initramfs %s: %w", p, err)
			}
		}
		if err := cw.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | cpio.FileMode(e.mode.Perm()), Size: int64(len(data)), ModTime: mtime, Links: 1}); err != nil {
			return nil, err
		}
		if _, err := cw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := cw.Close(); err != nil {
		return nil, fmt.Errorf("initramfs cpio: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("initramfs zstd: %w", err)
	}
	return out.Bytes(), nil
}

// populate fills the initramfs: busybox, ignition, extlinux and mke2fs with their
// libraries, the agent, kernel modules, the init script, and the package list of the
// Debian packages all of it (and the installed disk's boot code) comes from.
func populate(ctx context.Context, t *tree, kver, agentBin string) error {
	// Host files from Debian packages that the installed disk carries, in the initramfs or
	// as its boot code: the package list names their packages.
	debFiles := []string{busyboxBin.src, mbrBin.src, gptmbrBin.src, grubEFIDir.src}
	t.addData("/init", initScript, 0o755)
	t.addHost("/bin/busybox", busyboxBin.src, 0o755)
	applets, err := exec.CommandContext(ctx, busyboxBin.src, "--list").Output()
	if err != nil {
		return fmt.Errorf("listing busybox applets: %w", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			t.addLink("/bin/"+a, "busybox")
		}
	}
	t.addLink("/sbin", "bin")
	t.addLink("/usr/bin", "../bin")
	t.addLink("/usr/sbin", "../bin")
	// Ignition relabels after the files stage; this OS has no SELinux, so relabelling is
	// a no-op that succeeds.
	t.addData("/bin/setfiles", []byte(setfilesShim), 0o755)
	// Ignition disables a unit with `systemctl --root=ROOT disable UNIT` (it enables through
	// presets); this OS has no systemd, so this stand-in does what that means on disk.
	t.addData("/bin/systemctl", []byte(systemctlShim), 0o755)
	t.addHost("/bin/snofactory", agentBin, 0o755)
	// e2fsprogs' mke2fs beside busybox's, which cannot fix a UUID or hash seed, and its
	// chattr, which busybox lacks (init.sh's MKE2FS and CHATTR).
	for dst, src := range map[string]string{"/bin/ignition": ignitionBin.src, "/bin/extlinux": extlinuxBin.src,
		mke2fsPath: mke2fsBin.src, chattrPath: chattrBin.src, sgdiskPath: sgdiskBin.src, "/bin/resize2fs": resize2fsBin.src} {
		t.addHost(dst, src, 0o755)
		libs, err := sharedLibs(ctx, src)
		if err != nil {
			return err
		}
		for _, l := range libs {
			t.addHost(l, l, 0o755)
		}
		debFiles = append(append(debFiles, src), libs...)
	}
	if err := addBootCode(t); err != nil {
		return err
	}
	// Where the render stage's units expect the agent (render.AgentBinary); the
	// installer copies it into the installed root there too.
	t.addLink("/usr/local/bin/snofactory", "/bin/snofactory")
	order, err := moduleOrder(kver, Modules)
	if err != nil {
		return err
	}
	var list bytes.Buffer
	for _, rel := range order {
		dst := "/lib/modules/" + modName(rel) + ".ko"
		src := filepath.Join("/lib/modules", kver, rel)
		debFiles = append(debFiles, src)
		if strings.HasSuffix(rel, ".ko") {
			t.addHost(dst, src, 0o644)
		} else {
			// Newer Debian kernels compress modules; busybox insmod wants them plain.
			data, err := decompressModule(src)
			if err != nil {
				return err
			}
			t.addData(dst, data, 0o644)
		}
		fmt.Fprintln(&list, dst)
	}
	t.addData("/etc/modules.load", list.Bytes(), 0o644)
	// VERSION_ID is the builder's version number: os-release allows no "/" there, and SBOM
	// package URLs carry it.
	t.addData("/etc/os-release", []byte("NAME=\"snofactory conformance OS\"\nID=snofactory-conformance\nVERSION_ID="+
		strings.TrimPrefix(builderVersion, "conformance-iso/")+"\n"), 0o644)
	status, err := dpkgStatus(ctx, debFiles)
	if err != nil {
		return err
	}
	t.addData(DpkgStatusPath, status, 0o644)
	return nil
}

// addBootCode adds the installed disk's sector 0 for its MBR layout and syslinux's GPT boot
// code for its GPT one.
func addBootCode(t *tree) error {
	mbr, err := mbrImage()
	if err != nil {
		return err
	}
	t.addData(MBRImagePath, mbr, 0o644)
	t.addHost(GPTMBRPath, gptmbrBin.src, 0o644)
	return nil
}

// setfilesShim stands in for SELinux's setfiles, which Ignition's files stage runs on what
// it wrote (ignition internal/exec/stages/files/files.go relabelFiles): the conformance
// OSes have no SELinux policy, so relabelling is a no-op that succeeds.
const setfilesShim = "#!/bin/sh\n# No SELinux in the conformance OS: nothing to relabel.\nexit 0\n"

// systemctlShim is the conformance OS's systemctl: "disable" removes a unit's links from
// the .wants and .requires directories under --root; every other command (Ignition only
// disables) is refused, so a new use shows up as an error instead of silently passing.
const systemctlShim = `#!/bin/sh
# systemctl of the snofactory conformance OS: no systemd here, only what Ignition needs.
root=
cmd=
units=
while [ $# -gt 0 ]; do
	case "$1" in
	--root=*) root=${1#--root=} ;;
	--root) shift; root=$1 ;;
	-*) ;;
	*) if [ -z "$cmd" ]; then cmd=$1; else units="$units $1"; fi ;;
	esac
	shift
done
case "$cmd" in
disable)
	for u in $units; do
		rm -f "$root"/etc/systemd/system/*.wants/"$u" "$root"/etc/systemd/system/*.requires/"$u"
	done
	;;
*)
	echo "systemctl: $cmd is not supported in the conformance OS" >&2
	exit 1
	;;
esac
`

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibs lists the libraries (and the dynamic loader) a binary needs, as ldd sees them.
func sharedLibs(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := lddLine.FindStringSubmatch(line); m != nil {
			libs = append(libs, m[1])
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd %s listed no libraries", bin)
	}
	return libs, nil
}

// moduleOrder returns the modules (paths relative to /lib/modules/KVER) to load, every
// dependency before the modules that need it. Built-in modules are skipped.
func moduleOrder(kver string, want []string) ([]string, error) {
	dir := filepath.Join("/lib/modules", kver)
	deps := map[string][]string{}
	byName := map[string]string{}
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[modName(mod)] = mod
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading modules.dep: %w", err)
	}
	builtin, _ := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	var order []string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(m string) {
		if seen[m] {
			return
		}
		seen[m] = true
		for _, d := range deps[m] {
			visit(d)
		}
		order = append(order, m)
	}
	for _, w := range want {
		m, ok := byName[w]
		if !ok {
			if bytes.Contains(builtin, []byte("/"+w+".ko")) {
				continue
			}
			return nil, fmt.Errorf("kernel module %s not found for %s (Debian package %s)", w, kver, pkgKernel)
		}
		visit(m)
	}
	return order, nil
}

func decompressModule(src string) ([]byte, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("kernel module: %w", err)
	}
	defer f.Close()
	var r io.Reader
	switch {
	case strings.HasSuffix(src, ".xz"):
		if r, err = xz.NewReader(f); err != nil {
			return nil, fmt.Errorf("kernel module %s: %w", src, err)
		}
	case strings.HasSuffix(src, ".zst"):
		d, err := zstd.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: %w", src, err)
		}
		defer d.Close()
		r = d
	case strings.HasSuffix(src, ".gz"):
		g, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: %w", src, err)
		}
		r = g
	default:
		return nil, fmt.Errorf("kernel module %s: unknown compression", src)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", src, err)
	}
	return b, nil
}

func modName(rel string) string {
	b := path.Base(rel)
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		b = strings.TrimSuffix(b, ext)
	}
	b = strings.TrimSuffix(b, ".ko")
	return strings.ReplaceAll(b, "-", "_")
}

// e2fsprogs' mke2fs and chattr in the initramfs (init.sh's MKE2FS and CHATTR).
const (
	mke2fsPath = "/bin/mke2fs.e2fsprogs"
	chattrPath = "/bin/chattr.e2fsprogs"
)

// MBRImagePath is where the initramfs carries the installed disk's sector 0.
const MBRImagePath = "/usr/share/conformance/mbr.img"

// GPTMBRPath is syslinux's boot code for a GPT disk's protective MBR (init.sh GPTMBR), and
// sgdiskPath the GPT tool (init.sh SGDISK): a disk with a container-storage partition is GPT.
const (
	GPTMBRPath = "/usr/share/conformance/gptmbr.bin"
	sgdiskPath = "/bin/sgdisk"
)

// Installed disk layout, an MBR partition table (see mbrImage).
const (
	// ESPMiB is the EFI System Partition, the disk's first partition, from 1 MiB.
	ESPMiB = 8
	// PartitionMiB is the root partition (ext2, label RootLabel), right after the ESP.
	PartitionMiB = 192
	// MinDiskMiB is the smallest target disk the installer accepts.
	MinDiskMiB = 1 + ESPMiB + PartitionMiB
	// RootLabel is the root file system's label; boot loaders and the init find it by it.
	RootLabel = "sfroot"

	partitionStartSector = 2048
)

// mbrImage is sector 0 of an installed disk: syslinux's MBR boot code (for BIOS: it
// chain-loads the active partition's boot sector, which extlinux writes) and a table
// with two partitions: an EFI System Partition (type 0xef) and the active Linux root
// (0x83). An MBR rather than GPT because both firmwares boot it: SeaBIOS runs the boot
// code, and UEFI (OVMF) takes an MBR partition of type 0xef as an ESP and starts its
// EFI/BOOT/BOOTX64.EFI. So one layout boots either way, and the busybox installer
// writes it with a single sector, no GPT tool needed.
func mbrImage() ([]byte, error) {
	code, err := os.ReadFile(mbrBin.src)
	if err != nil {
		return nil, fmt.Errorf("reading MBR boot code (Debian package %s): %w", pkgExtlinux, err)
	}
	if len(code) > 440 {
		return nil, fmt.Errorf("%s is %d bytes, more than the 440 bytes of MBR boot code", mbrBin.src, len(code))
	}
	sector := make([]byte, 512)
	copy(sector, code)
	copy(sector[440:444], []byte(DiskSignature))
	espStart := uint32(partitionStartSector)
	rootStart := espStart + ESPMiB<<11
	partitionEntry(sector[446:462], false, 0xef, espStart, ESPMiB<<11)
	partitionEntry(sector[462:478], true, 0x83, rootStart, PartitionMiB<<11)
	sector[510], sector[511] = 0x55, 0xaa
	return sector, nil
}

// DiskSignature is the MBR disk signature of an installed disk, as 4 bytes at offset
// 440; the installer refuses to install over a disk that carries it (see init.sh).
const DiskSignature = "SNOF"

// partitionEntry fills one 16-byte MBR partition entry, LBA only (CHS unused).
func partitionEntry(e []byte, active bool, typ byte, start, sectors uint32) {
	if active {
		e[0] = 0x80
	}
	copy(e[1:4], []byte{0xfe, 0xff, 0xff})
	e[4] = typ
	copy(e[5:8], []byte{0xfe, 0xff, 0xff})
	binary.LittleEndian.PutUint32(e[8:12], start)
	binary.LittleEndian.PutUint32(e[12:16], sectors)
}
