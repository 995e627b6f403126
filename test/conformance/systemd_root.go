package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// debianTreeVersion changes when the mmdebstrap call changes in a way its arguments do
// not show.
const debianTreeVersion = "debian-tree/1"

// mmdebstrapArgs make the root's Debian tree as a tar at out: the essential set and
// SystemdPackages, without documentation, manual pages, info pages and translations.
func mmdebstrapArgs(mirror, out string) []string {
	security := strings.TrimSuffix(mirror, "/debian") + "/debian-security"
	if !strings.HasSuffix(mirror, "/debian") {
		security = mirror
	}
	args := []string{"--quiet", "--variant=essential", "--mode=root",
		"--include=" + strings.Join(SystemdPackages, ","),
		"--aptopt=Acquire::Retries \"3\"",
		"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright", "--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		debianSuite, out,
		"deb " + mirror + " " + debianSuite + " main",
		"deb " + mirror + " " + debianSuite + "-updates main"}
	if security != mirror {
		args = append(args, "deb "+security+" "+debianSuite+"-security main")
	}
	return args
}

// debianTree returns the cached Debian tree (a tar in o.Dir), running mmdebstrap first when
// the cached one was made with other arguments, and how long that took.
func debianTree(ctx context.Context, o SystemdOptions) (string, time.Duration, error) {
	mirror := o.Mirror
	if mirror == "" {
		mirror = os.Getenv("DEBIAN_MIRROR")
	}
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	out := filepath.Join(o.Dir, "debian.tar")
	// mmdebstrap picks its output format by the name's extension: a tar.
	tmp := filepath.Join(o.Dir, ".debian-partial.tar")
	args := mmdebstrapArgs(mirror, tmp)
	sum := sha256.Sum256([]byte(debianTreeVersion + "\n" + strings.Join(mmdebstrapArgs(mirror, "OUT"), "\n")))
	want := hex.EncodeToString(sum[:])
	if b, err := os.ReadFile(out + ".inputs"); err == nil && strings.TrimSpace(string(b)) == want {
		if _, err := os.Stat(out); err == nil {
			return out, 0, nil
		}
	}
	o.Log.Info("making the systemd conformance OS's Debian tree with mmdebstrap (minutes)", "mirror", mirror,
		"packages", strings.Join(SystemdPackages, " "))
	start := time.Now()
	// At the lowest priority: the build shares the machine with the tests that wait for it.
	cmd := exec.Command("nice", append([]string{"-n", "19", "mmdebstrap"}, args...)...)
	if err := pipeline.RunTool(ctx, cmd, nil); err != nil {
		os.RemoveAll(tmp)
		return "", 0, fmt.Errorf("mmdebstrap of the systemd conformance OS (it needs root and the Debian mirror %s): %w", mirror, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", 0, fmt.Errorf("systemd conformance OS tree: %w", err)
	}
	if err := pipeline.WriteFileAtomic(out+".inputs", []byte(want+"\n"), 0o644); err != nil {
		return "", 0, fmt.Errorf("systemd conformance OS tree stamp: %w", err)
	}
	return out, time.Since(start), nil
}

// systemdInitrd is the initramfs: busybox, the modules that reach the root disk, and an
// init that mounts the root and starts systemd.
func systemdInitrd(ctx context.Context, kver string) (*tree, error) {
	t := newTree()
	init, err := systemdFiles.ReadFile("systemd/init")
	if err != nil {
		return nil, err
	}
	t.addData("/init", init, 0o755)
	t.addHost("/bin/busybox", busyboxBin.src, 0o755)
	for _, a := range []string{"sh", "mount", "umount", "insmod", "findfs", "sleep", "cat", "switch_root", "echo"} {
		t.addLink("/bin/"+a, "busybox")
	}
	order, err := moduleOrder(kver, systemdInitrdModules)
	if err != nil {
		return nil, err
	}
	var list strings.Builder
	for _, rel := range order {
		dst := "/lib/modules/" + modName(rel) + ".ko"
		src := filepath.Join("/lib/modules", kver, rel)
		if strings.HasSuffix(rel, ".ko") {
			t.addHost(dst, src, 0o644)
		} else {
			data, err := decompressModule(src)
			if err != nil {
				return nil, err
			}
			t.addData(dst, data, 0o644)
		}
		list.WriteString(dst + "\n")
	}
	t.addData("/etc/modules.load", []byte(list.String()), 0o644)
	return t, ctx.Err()
}

// assembleSystemd unpacks the Debian tree, makes it the sealed conformance OS
// (customizeRoot), and writes the kernel, the initramfs and the root image into place.
func assembleSystemd(ctx context.Context, in systemdInput, res SystemdOS) error {
	root := filepath.Join(in.work, "root")
	if err := unpackTree(ctx, in.tarball, root); err != nil {
		return err
	}
	if err := customizeRoot(ctx, root, in.kver, in.agent); err != nil {
		return fmt.Errorf("systemd conformance OS root: %w", err)
	}
	img := filepath.Join(in.work, "root.img")
	if err := rootImage(ctx, root, in.kernel, in.initrd, img); err != nil {
		return err
	}
	cpio, err := in.initrd.initramfs()
	if err != nil {
		return err
	}
	if err := pipeline.WriteFileAtomic(res.Initrd, cpio, 0o644); err != nil {
		return err
	}
	if err := copyInto(in.kernel, res.Kernel); err != nil {
		return err
	}
	if err := os.Rename(img, res.Root); err != nil {
		return fmt.Errorf("systemd conformance OS root image: %w", err)
	}
	return nil
}

// rootImage puts the kernel and initramfs in root's /boot and makes root the ext4 image img.
func rootImage(ctx context.Context, root, kernel string, initrd *tree, img string) error {
	cpio, err := initrd.initramfs()
	if err != nil {
		return err
	}
	if err := writeBootFiles(root, kernel, cpio); err != nil {
		return fmt.Errorf("systemd conformance OS /boot: %w", err)
	}
	size, err := treeBytes(root)
	if err != nil {
		return err
	}
	// Room for the first boot's journal and the site's changes; the file stays sparse.
	// Without 64bit: extlinux, which boots the seed's disk, reads the classic ext4 layout.
	mib := size>>20 + size>>22 + 256
	mkfs := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-O", "^64bit", "-m", "0", "-L", SystemdRootLabel, "-d", root, img, strconv.FormatInt(mib, 10)+"M")
	if err := pipeline.RunTool(ctx, mkfs, nil); err != nil {
		return fmt.Errorf("making the systemd conformance OS root image: %w", err)
	}
	return nil
}

func copyInto(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	return pipeline.WriteFileAtomic(dst, b, 0o644)
}

// treeBytes is the size of the regular files under dir.
func treeBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}
