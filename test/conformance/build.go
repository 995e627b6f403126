package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// builderVersion changes whenever the layout this package produces changes, so cached
// ISOs from an older builder are rebuilt.
const builderVersion = "conformance-iso/9"

//go:embed init.sh
var initScript []byte

// Layout constants of the ISO, shared with the init script and the tests.
const (
	VolumeID        = "SNOFACTORY_CONFORMANCE"
	IgnitionImgPath = "images/ignition.img"
	IgnitionImgSize = 256 << 10
	KargsAreaSize   = 1024
	// DefaultKargs are the kernel arguments in the karg areas of a pristine ISO; the
	// installed disk boots with them too. no_timer_check: under TCG on a loaded host the
	// kernel's IO-APIC timer check can miss its ticks and panic the boot ("IO-APIC + timer
	// doesn't work"); cloud images carry it for the same reason.
	DefaultKargs = "console=ttyS0 quiet no_timer_check ignition.firstboot ignition.platform.id=metal"
	// AgentPort is the virtio-serial port name the init reports on.
	AgentPort = "org.snofactory.agent.0"
)

// Modules are the kernel modules the init loads (their dependencies come along).
var Modules = []string{
	"virtio_pci", "virtio_console", "virtio_blk", // virtio-serial reporting, target disk
	"ata_piix", "sr_mod", "isofs", // the live CD, read when installing
	"ext4", "crc32c_generic", // the installed root (ext2, through ext4)
	"virtio_net", "af_packet", // the site network a sealed seed is reconfigured onto (udhcpc needs packet sockets)
}

// Options say where the inputs come from. Zero values mean the Debian locations.
type Options struct {
	// Out is the ISO to write.
	Out string
	// AgentBinary is a static snofactory binary; empty builds one from ModuleDir.
	AgentBinary string
	// ModuleDir is the snofactory Go module root (for building the agent); empty finds
	// it with `go env GOMOD`.
	ModuleDir string
	// Kernel is the kernel image; empty picks the newest /boot/vmlinuz-*.
	Kernel string
	// MetalImage is a whole raw disk image the ISO carries (gzipped, at MetalImagePath);
	// its installer then writes it to the target instead of the busybox OS, as
	// coreos-installer writes the metal image. Empty: the busybox OS.
	MetalImage string
	// Force rebuilds even when the cached ISO matches its inputs.
	Force bool
	Log   *slog.Logger
}

// MetalImagePath is where a live ISO carries its disk image (init.sh METAL_IMAGE).
const MetalImagePath = "images/metal.img.gz"

// Result says what Build did.
type Result struct {
	ISO       string
	InputHash string
	Cached    bool
	Duration  time.Duration
}

// Debian package that provides each host tool or file, for error messages.
const (
	pkgKernel    = "linux-image-amd64"
	pkgBusybox   = "busybox-static"
	pkgIgnition  = "ignition"
	pkgIsolinux  = "isolinux"
	pkgSyslinux  = "syslinux-common"
	pkgExtlinux  = "extlinux"
	pkgXorriso   = "xorriso"
	pkgGrubEFI   = "grub-efi-amd64-bin"
	pkgE2fsprogs = "e2fsprogs"
	pkgGdisk     = "gdisk"
	ignitionPath = "/usr/lib/dracut/modules.d/30ignition/ignition"
)

type hostFile struct {
	src, pkg string
}

var (
	isolinuxBin = hostFile{"/usr/lib/ISOLINUX/isolinux.bin", pkgIsolinux}
	isohdpfx    = hostFile{"/usr/lib/ISOLINUX/isohdpfx.bin", pkgIsolinux}
	ldlinuxC32  = hostFile{"/usr/lib/syslinux/modules/bios/ldlinux.c32", pkgSyslinux}
	mbrBin      = hostFile{"/usr/lib/EXTLINUX/mbr.bin", pkgExtlinux}
	busyboxBin  = hostFile{"/bin/busybox", pkgBusybox}
	extlinuxBin = hostFile{"/usr/bin/extlinux", pkgExtlinux}
	ignitionBin = hostFile{ignitionPath, pkgIgnition}
	grubEFIDir  = hostFile{"/usr/lib/grub/x86_64-efi/linux.mod", pkgGrubEFI}
	// e2fsprogs' mke2fs rather than busybox's: it takes the UUID, hash seed and time the
	// install request fixes. Its chattr marks /var/lib a top of directory hierarchy
	// (busybox has none).
	mke2fsBin = hostFile{"/sbin/mke2fs", pkgE2fsprogs}
	chattrBin = hostFile{"/usr/bin/chattr", pkgE2fsprogs}
	// sgdisk and syslinux's GPT boot code lay out a GPT disk when a blueprint asks for a
	// separate /var/lib/containers partition (init.sh partition_gpt).
	sgdiskBin = hostFile{"/usr/sbin/sgdisk", pkgGdisk}
	// resize2fs grows the container-storage partition's file system online at the site
	// (the hook's container-storage step).
	resize2fsBin = hostFile{"/sbin/resize2fs", pkgE2fsprogs}
	gptmbrBin    = hostFile{"/usr/lib/EXTLINUX/gptmbr.bin", pkgExtlinux}
)

// Host tools, by the Debian package that provides them.
var tools = map[string]string{
	"xorriso":      pkgXorriso,
	"grub-mkimage": "grub-common",
	"mkfs.vfat":    "dosfstools",
	"mmd":          "mtools",
	"mcopy":        "mtools",
}

func (h hostFile) check() error {
	if _, err := os.Stat(h.src); err != nil {
		return fmt.Errorf("%s is missing (install the Debian package %s): %w", h.src, h.pkg, err)
	}
	return nil
}

// Build writes the conformance ISO to o.Out unless a cached copy built from the same
// inputs is already there.
func Build(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if o.Out == "" {
		return Result{}, errors.New("conformance: no output path")
	}
	res := Result{ISO: o.Out}
	// Tests in several packages and `make conformance-iso` may build at once: one
	// builds, the others then find its result cached.
	unlock, err := lockOutput(ctx, o.Out)
	if err != nil {
		return res, err
	}
	defer unlock()
	for _, h := range []hostFile{isolinuxBin, isohdpfx, ldlinuxC32, mbrBin, busyboxBin, extlinuxBin, ignitionBin, mke2fsBin, chattrBin, sgdiskBin, resize2fsBin, gptmbrBin, grubEFIDir} {
		if err := h.check(); err != nil {
			return res, fmt.Errorf("conformance ISO: %w", err)
		}
	}
	for tool, pkg := range tools {
		if _, err := lookTool(tool); err != nil {
			return res, fmt.Errorf("conformance ISO needs %s (Debian package %s): %w", tool, pkg, err)
		}
	}
	kernel, kver, err := findKernel(o.Kernel)
	if err != nil {
		return res, err
	}
	work, err := os.MkdirTemp(filepath.Dir(absOrSelf(o.Out)), ".conformance-*")
	if err != nil {
		return res, fmt.Errorf("conformance work dir: %w", err)
	}
	defer os.RemoveAll(work)

	agentBin := o.AgentBinary
	if agentBin == "" {
		agentBin = filepath.Join(work, "snofactory")
		if err := buildAgent(ctx, o.ModuleDir, agentBin); err != nil {
			return res, err
		}
	}

	root := newTree()
	if err := populate(ctx, root, kver, agentBin); err != nil {
		return res, err
	}
	if res.InputHash, err = inputHash(kernel, kver, root, o.MetalImage); err != nil {
		return res, err
	}
	stamp := o.Out + ".inputs"
	if !o.Force {
		if b, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(b)) == res.InputHash {
			if _, err := os.Stat(o.Out); err == nil {
				res.Cached = true
				res.Duration = time.Since(start)
				log.Info("conformance ISO is up to date", "iso", o.Out, "inputs", res.InputHash[:12])
				return res, nil
			}
		}
	}

	if err := assemble(ctx, work, kernel, root, o.MetalImage, o.Out); err != nil {
		return res, err
	}
	if err := pipeline.WriteFileAtomic(stamp, []byte(res.InputHash+"\n"), 0o644); err != nil {
		return res, fmt.Errorf("conformance ISO stamp: %w", err)
	}
	res.Duration = time.Since(start)
	log.Info("built conformance ISO", "iso", o.Out, "kernel", kver, "duration", res.Duration.Round(time.Millisecond))
	return res, nil
}

// inputHash covers every byte that goes into the ISO, so equal hashes mean an equal ISO
// and the expensive part (compressing, xorriso) can be skipped.
func inputHash(kernel, kver string, root *tree, metal string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", builderVersion)
	fmt.Fprintf(h, "kernel %s\n", kver)
	if err := hashFile(h, kernel); err != nil {
		return "", err
	}
	if metal != "" {
		fmt.Fprintf(h, "metal image\n")
		if err := hashFile(h, metal); err != nil {
			return "", err
		}
	}
	if err := root.hash(h); err != nil {
		return "", err
	}
	for _, f := range []hostFile{isolinuxBin, isohdpfx, ldlinuxC32, grubEFIDir} {
		if err := hashFile(h, f.src); err != nil {
			return "", err
		}
	}
	if err := hashGrubModules(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// assemble builds the ISO from the initramfs tree and the kernel in work and moves it
// to out.
func assemble(ctx context.Context, work, kernel string, root *tree, metal, out string) error {
	// The installed disk's ESP is made here, after hashing: FAT directory entries carry
	// the time they were made, so its bytes differ between builds of equal inputs.
	esp, err := espImage(ctx, work)
	if err != nil {
		return err
	}
	root.addData(ESPImagePath, esp, 0o644)
	stage := filepath.Join(work, "iso")
	if err := writeISOTree(stage, kernel, root); err != nil {
		return err
	}
	if err := writeEFIBoot(ctx, work, filepath.Join(stage, efiBootImg)); err != nil {
		return err
	}
	if metal != "" {
		if err := gzipFile(ctx, metal, filepath.Join(stage, MetalImagePath)); err != nil {
			return fmt.Errorf("the live ISO's disk image: %w", err)
		}
	}
	tmpISO := filepath.Join(work, "out.iso")
	// BIOS: isolinux through El Torito and a hybrid MBR; UEFI: a FAT El Torito image with
	// GRUB, which reads its menu (and karg area) from the ISO itself.
	args := []string{"-as", "mkisofs", "-quiet", "-o", tmpISO, "-V", VolumeID, "-R", "-J",
		"-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat",
		"-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-isohybrid-mbr", isohdpfx.src,
		"-eltorito-alt-boot", "-e", efiBootImg, "-no-emul-boot", "-isohybrid-gpt-basdat",
		stage}
	xorriso, _ := lookTool("xorriso")
	if err := pipeline.RunTool(ctx, exec.Command(xorriso, args...), nil); err != nil {
		return fmt.Errorf("building the conformance ISO: %w", err)
	}
	if err := os.Rename(tmpISO, out); err != nil {
		return fmt.Errorf("conformance ISO: %w", err)
	}
	return nil
}

func absOrSelf(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// findKernel returns the kernel image and its release (the /lib/modules directory name).
func findKernel(kernel string) (path, release string, err error) {
	if kernel == "" {
		matches, _ := filepath.Glob("/boot/vmlinuz-*")
		sort.Strings(matches)
		if len(matches) == 0 {
			return "", "", fmt.Errorf("no kernel in /boot (install the Debian package %s)", pkgKernel)
		}
		kernel = matches[len(matches)-1]
	}
	release = strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	if _, err := os.Stat(filepath.Join("/lib/modules", release, "modules.dep")); err != nil {
		return "", "", fmt.Errorf("kernel %s has no modules under /lib/modules/%s (Debian package %s): %w", kernel, release, pkgKernel, err)
	}
	return kernel, release, nil
}

func buildAgent(ctx context.Context, moduleDir, out string) error {
	if moduleDir == "" {
		b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil {
			return fmt.Errorf("finding the snofactory module (go env GOMOD): %w", err)
		}
		gomod := strings.TrimSpace(string(b))
		if gomod == "" || gomod == os.DevNull {
			return errors.New("finding the snofactory module: not inside it; set ModuleDir or pass an agent binary")
		}
		moduleDir = filepath.Dir(gomod)
	}
	// go run keeps the linked executable in the Go build cache (go build -o links every
	// time); -exec cp copies it to out instead of running it. Every package whose tests
	// check the cached ISO builds this agent, so it is linked once, not once a package.
	cmd := exec.Command("go", "run", "-trimpath", "-tags", "containers_image_openpgp exclude_graphdriver_btrfs",
		"-ldflags", "-s -w", "-exec", "cp", "./cmd/snofactory", out)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if err := pipeline.RunTool(ctx, cmd, nil); err != nil {
		return fmt.Errorf("building the snofactory agent: %w", err)
	}
	return nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("hashing input: %w", err)
	}
	defer f.Close()
	// Only the content: the same file from another place (the agent is built into a
	// fresh temporary directory every time) is the same input.
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("hashing input %s: %w", path, err)
	}
	return nil
}

// writeISOTree lays out the ISO's files in dir.
func writeISOTree(dir, kernel string, root *tree) error {
	initrd, err := root.initramfs()
	if err != nil {
		return err
	}
	kb, err := os.ReadFile(kernel)
	if err != nil {
		return fmt.Errorf("reading kernel: %w", err)
	}
	iso, err := os.ReadFile(isolinuxBin.src)
	if err != nil {
		return err
	}
	ldl, err := os.ReadFile(ldlinuxC32.src)
	if err != nil {
		return err
	}
	cfg, kargsOffset := isolinuxConfig()
	grubCfg, grubOffset := grubConfig()
	kargsJSON, err := json.MarshalIndent(map[string]any{
		"default": DefaultKargs,
		"files": []map[string]any{
			{"path": grubCfgPath, "offset": grubOffset, "pad": "#", "end": "\n"},
			{"path": "isolinux/isolinux.cfg", "offset": kargsOffset, "pad": "#", "end": "\n"},
		},
		"size": KargsAreaSize,
	}, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"images/pxeboot/vmlinuz":    kb,
		"images/pxeboot/initrd.img": initrd,
		IgnitionImgPath:             make([]byte, IgnitionImgSize),
		"isolinux/isolinux.bin":     iso,
		"isolinux/ldlinux.c32":      ldl,
		"isolinux/isolinux.cfg":     cfg,
		grubCfgPath:                 grubCfg,
		"coreos/igninfo.json":       []byte(`{"file": "` + IgnitionImgPath + `"}` + "\n"),
		"coreos/kargs.json":         append(kargsJSON, '\n'),
		// No NetworkManager in this OS, so no live-initrd-network; no installer config.
		"coreos/features.json": []byte(`{"installer-config": false, "live-initrd-network": false}` + "\n"),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("staging %s: %w", name, err)
		}
	}
	return nil
}

// isolinuxConfig returns isolinux.cfg and the offset of its karg area: the default
// kargs, a newline, then '#' comment padding up to KargsAreaSize, as CoreOS lays it out.
func isolinuxConfig() ([]byte, int) {
	var b bytes.Buffer
	b.WriteString("serial 0 115200\ndefault live\nprompt 0\ntimeout 0\n\nlabel live\n  kernel /images/pxeboot/vmlinuz\n")
	b.WriteString("  append initrd=/images/pxeboot/initrd.img,/" + IgnitionImgPath + " ")
	off := b.Len()
	b.WriteString(kargsArea())
	b.WriteString("\n")
	return b.Bytes(), off
}

const (
	efiBootImg  = "images/efiboot.img"
	grubCfgPath = "EFI/BOOT/grub.cfg"
)

// kargsArea is the default kargs, a newline, then '#' comment padding up to
// KargsAreaSize, as CoreOS lays out its karg areas.
func kargsArea() string {
	return DefaultKargs + "\n" + strings.Repeat("#", KargsAreaSize-len(DefaultKargs)-1)
}

// grubConfig returns the ISO's GRUB menu (UEFI) and the offset of its karg area.
func grubConfig() ([]byte, int) {
	var b bytes.Buffer
	b.WriteString("serial --unit=0 --speed=115200\nterminal_input serial console\nterminal_output serial console\nset timeout=0\n\n")
	b.WriteString("menuentry 'snofactory conformance OS (live)' {\n  linux /images/pxeboot/vmlinuz ")
	off := b.Len()
	b.WriteString(kargsArea())
	b.WriteString("\n  initrd /images/pxeboot/initrd.img /" + IgnitionImgPath + "\n}\n")
	return b.Bytes(), off
}

// writeEFIBoot makes the El Torito EFI image: a small FAT holding GRUB, whose built-in
// config finds the ISO by its volume label and reads the menu from it, so kargs live in
// one place on the ISO.
func writeEFIBoot(ctx context.Context, work, out string) error {
	early := filepath.Join(work, "grub-early.cfg")
	if err := os.WriteFile(early, []byte("search --no-floppy --set=root --label "+VolumeID+"\nset prefix=($root)/EFI/BOOT\nconfigfile ($root)/"+grubCfgPath+"\n"), 0o644); err != nil {
		return err
	}
	efi := filepath.Join(work, "BOOTX64.EFI")
	mkimage := append([]string{"grub-mkimage", "-O", "x86_64-efi", "-p", "/EFI/BOOT", "-c", early, "-o", efi}, isoGrubModules()...)
	if err := runSteps(ctx, mkimage); err != nil {
		return fmt.Errorf("EFI boot image: %w", err)
	}
	if err := fatImage(ctx, out, "EFIBOOT", 2048, efi); err != nil {
		return fmt.Errorf("EFI boot image: %w", err)
	}
	return nil
}

// GRUB modules of the ISO's EFI loader and of the installed disk's.
func isoGrubModules() []string {
	return []string{"normal", "configfile", "search", "search_label", "iso9660", "fat", "part_msdos", "part_gpt",
		"linux", "serial", "terminal", "echo", "test"}
}

func diskGrubModules() []string {
	return []string{"normal", "configfile", "search", "search_label", "ext2", "part_msdos", "part_gpt",
		"linux", "serial", "terminal", "echo", "test"}
}

// hashGrubModules adds the GRUB modules both loaders are made of to the input hash.
func hashGrubModules(h io.Writer) error {
	mods := map[string]bool{}
	for _, m := range append(isoGrubModules(), diskGrubModules()...) {
		mods[m] = true
	}
	names := make([]string, 0, len(mods))
	for m := range mods {
		names = append(names, m)
	}
	sort.Strings(names)
	dir := filepath.Dir(grubEFIDir.src)
	files := []string{"kernel.img"}
	for _, m := range names {
		files = append(files, m+".mod")
	}
	for _, f := range files {
		fmt.Fprintf(h, "grub %s\n", f)
		if err := hashFile(h, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}

// ESPImagePath is where the initramfs carries the installed disk's EFI System
// Partition image, which the installer writes to the disk's first partition.
const ESPImagePath = "/usr/share/conformance/esp.img"

// espImage makes the installed disk's EFI System Partition (ESPMiB of FAT): the
// removable-media loader path EFI/BOOT/BOOTX64.EFI, a GRUB whose built-in config finds
// the root partition by its label and reads the menu the installer wrote there
// (/boot/grub/grub.cfg), so the kernel arguments of a UEFI disk boot live on the root
// like extlinux's. No boot entry is needed: firmware with fresh variables (OVMF) tries
// that path on every disk.
func espImage(ctx context.Context, work string) ([]byte, error) {
	early := filepath.Join(work, "grub-disk.cfg")
	cfg := "search --no-floppy --set=root --label " + RootLabel + "\nset prefix=($root)/boot/grub\nconfigfile ($root)/boot/grub/grub.cfg\n"
	if err := os.WriteFile(early, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	efi := filepath.Join(work, "disk-BOOTX64.EFI")
	mkimage := append([]string{"grub-mkimage", "-O", "x86_64-efi", "-p", "/boot/grub", "-c", early, "-o", efi}, diskGrubModules()...)
	if err := runSteps(ctx, mkimage); err != nil {
		return nil, fmt.Errorf("installed disk's EFI loader: %w", err)
	}
	out := filepath.Join(work, "esp.img")
	if err := fatImage(ctx, out, "SFESP", ESPMiB<<10, efi); err != nil {
		return nil, fmt.Errorf("installed disk's ESP: %w", err)
	}
	return os.ReadFile(out)
}

// fatImage makes a FAT file system image of sizeKiB at out holding efi as
// EFI/BOOT/BOOTX64.EFI.
func fatImage(ctx context.Context, out, label string, sizeKiB int, efi string) error {
	return runSteps(ctx,
		[]string{"mkfs.vfat", "-n", label, "-i", "534e4f46", "-C", out, strconv.Itoa(sizeKiB)},
		[]string{"mmd", "-i", out, "::/EFI", "::/EFI/BOOT"},
		[]string{"mcopy", "-i", out, efi, "::/EFI/BOOT/BOOTX64.EFI"},
	)
}

// runSteps runs host tools one after the other, each a command line.
func runSteps(ctx context.Context, steps ...[]string) error {
	for _, st := range steps {
		tool, err := lookTool(st[0])
		if err != nil {
			return err
		}
		if err := pipeline.RunTool(ctx, exec.Command(tool, st[1:]...), nil); err != nil {
			return err
		}
	}
	return nil
}

// lookTool finds a host tool on PATH or in the sbin directories, which a normal user's
// PATH on Debian lacks (mkfs.vfat lives in /sbin).
func lookTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if st, serr := os.Stat(filepath.Join(dir, name)); serr == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", err
}
