package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// The systemd OS as a seed, for seed boot: its root image in the second partition of a
// disk laid out as the busybox installer lays out an installed disk (mbrImage: syslinux's
// MBR, an ESP, the active root partition), booted by extlinux from the root's /boot.
const (
	// SystemdSeedDirName is the seed directory inside SystemdOptions.Dir.
	SystemdSeedDirName = "seed"
	// systemdExtlinux is the boot menu: the kernel and initramfs of the -kernel boot, with
	// its arguments, so both boots run the same OS.
	systemdExtlinux = "serial 0 115200\ndefault sno\nprompt 0\ntimeout 0\nlabel sno\n" +
		"  kernel /boot/vmlinuz\n  initrd /boot/initrd.img\n  append " + SystemdKargs + "\n"
)

// writeBootFiles puts the kernel, the initramfs and extlinux's menu in the root's /boot.
func writeBootFiles(root, kernel string, initrd []byte) error {
	dir := filepath.Join(root, "boot", "extlinux")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := copyInto(kernel, filepath.Join(root, "boot", "vmlinuz")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "boot", "initrd.img"), initrd, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "extlinux.conf"), []byte(systemdExtlinux), 0o644)
}

// writeSystemdSeed makes the seed directory out of the sealed root image: the bootable disk,
// packed by the seal stage's own packaging (seed.PackDisk), and seed.json. The seed
// records no site fit: the conformance OS has no cluster to compare (as a coreos seed).
func writeSystemdSeed(ctx context.Context, work, rootImg, out, inputHash string) error {
	disk := filepath.Join(work, "disk.raw")
	if err := systemdDisk(ctx, work, rootImg, disk); err != nil {
		return fmt.Errorf("the systemd seed's disk: %w", err)
	}
	dir := filepath.Join(work, SystemdSeedDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d, err := seed.PackDisk(ctx, disk, dir)
	if err != nil {
		return err
	}
	inputs := digest.FromString(inputHash)
	m := &seed.Manifest{SchemaVersion: seed.SchemaVersion, Name: SystemdSeedName, Target: oskind.CoreOS,
		Firmware: seed.FirmwareBIOS, BlueprintDigest: inputs, LockDigest: inputs,
		ReconfigurationAPIVersion: siteconfig.APIVersion, Created: time.Unix(0, 0).UTC(),
		Tools: map[string]string{"conformance": systemdVersion}, Images: []seed.Image{}, Disks: []seed.Disk{d}}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("the systemd seed's manifest: %w", err)
	}
	if err := seed.WriteManifest(dir, m); err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(dir, out)
}

// systemdDisk lays out disk: sector 0 from mbrImage with the root partition sized to the
// root image, the image copied in (sparse), and extlinux installed on the partition.
func systemdDisk(ctx context.Context, work, rootImg, disk string) error {
	fi, err := os.Stat(rootImg)
	if err != nil {
		return err
	}
	mbr, err := mbrImage()
	if err != nil {
		return err
	}
	rootStart := uint32(partitionStartSector + ESPMiB<<11)
	sectors := fi.Size() / 512
	if sectors > 1<<32-1-int64(rootStart) {
		return fmt.Errorf("root image %s is too big for an MBR partition", rootImg)
	}
	partitionEntry(mbr[462:478], true, 0x83, rootStart, uint32(sectors))
	if err := os.WriteFile(disk, mbr, 0o600); err != nil {
		return err
	}
	dd := exec.CommandContext(ctx, "dd", "if="+rootImg, "of="+disk, "bs=512", "seek="+strconv.Itoa(int(rootStart)),
		"conv=sparse,notrunc", "status=none")
	if err := pipeline.RunTool(ctx, dd, nil); err != nil {
		return fmt.Errorf("copying the root image: %w", err)
	}
	return installExtlinux(ctx, work, disk, int64(rootStart)*512)
}

// installExtlinux runs extlinux --install on the disk's root partition, mounted through a
// loop device at the partition's offset (this host's loop devices may not scan partitions).
// extlinux then records sectors from the partition's start, which is right: its boot
// sector adds the offset the MBR hands it in DS:SI (syslinux core/diskboot.inc,
// "harddisk:", the MBR-style partition info), as on the installed busybox disk.
func installExtlinux(ctx context.Context, work, disk string, offset int64) (err error) {
	mnt := filepath.Join(work, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	mount := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,offset="+strconv.FormatInt(offset, 10), disk, mnt)
	if err := pipeline.RunTool(ctx, mount, nil); err != nil {
		return fmt.Errorf("mounting the seed's root partition (needs root and loop devices): %w", err)
	}
	defer func() {
		if e := exec.Command("umount", mnt).Run(); e != nil {
			err = errors.Join(err, fmt.Errorf("umount %s: %w", mnt, e))
		}
	}()
	install := exec.CommandContext(ctx, "extlinux", "--install", filepath.Join(mnt, "boot", "extlinux"))
	if err := pipeline.RunTool(ctx, install, nil); err != nil {
		return fmt.Errorf("extlinux --install (Debian package extlinux): %w", err)
	}
	return nil
}
