package conformance

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// The systemd conformance OS: a Debian root with systemd, NetworkManager, OpenSSH and chrony
// (RHCOS's user space, as far as a site's reconfiguration touches it), the snofactory agent,
// and the host's kernel booted directly with a small initramfs that mounts the root disk.
// Slower to boot than the busybox OS, so only the tests that need real units and
// NetworkManager use it.
const (
	// DefaultSystemdDir is where `make conformance-systemd` puts the OS, relative to the
	// module root.
	DefaultSystemdDir = "build/conformance-systemd"
	// SystemdRootLabel is the root file system's label; the initramfs mounts it by it.
	SystemdRootLabel = "sfsysroot"
	// SystemdKargs are the kernel arguments the OS boots with.
	// no_timer_check as in DefaultKargs: a loaded TCG host must not panic the boot.
	SystemdKargs = "console=ttyS0 no_timer_check root=LABEL=" + SystemdRootLabel
	// systemdVersion changes whenever the layout of the OS changes, so cached images from an
	// older builder are rebuilt.
	systemdVersion = "conformance-systemd/3"
	// debianSuite is the release the root is made of: the one this project's hosts run.
	debianSuite = "bookworm"
)

// SystemdPackages are the Debian packages the root is made of, beside the essential set
// (and what they depend on). ca-certificates is the trust store a site's bundle joins
// (update-ca-certificates, Debian's update-ca-trust); curl is the node's HTTP client that
// goes through the site proxy, as RHCOS's units do from the MCO's proxy.env.
var SystemdPackages = []string{"systemd", "systemd-sysv", "udev", "dbus", "network-manager",
	"openssh-server", "chrony", "kmod", "iproute2", "ca-certificates", "curl"}

// Kernel modules of the initramfs (to reach and mount the root disk) and of the root (udev
// loads them: the NICs, the agent's port, bonds and VLANs the site's network may make).
var (
	systemdInitrdModules = []string{"virtio_pci", "virtio_blk", "ext4", "crc32c_generic"}
	systemdRootModules   = []string{"virtio_net", "virtio_console", "bonding", "8021q"}
)

//go:embed systemd
var systemdFiles embed.FS

// SystemdOptions say where the systemd OS goes and where its inputs come from.
type SystemdOptions struct {
	// Dir receives vmlinuz, initrd.img and root.img (and the cached root file tree).
	Dir string
	// AgentBinary, ModuleDir and Kernel are as in Options.
	AgentBinary, ModuleDir, Kernel string
	// Mirror is the Debian mirror; empty means $DEBIAN_MIRROR, else deb.debian.org.
	Mirror string
	// Force rebuilds the root image (not the cached package tree: remove it for that).
	Force bool
	Log   *slog.Logger
}

// SystemdOS is a built systemd conformance OS: boot Kernel with Initrd and Kargs, the raw
// ext4 Root as the first virtio disk.
type SystemdOS struct {
	Kernel, Initrd, Root string
	// Seed is the same sealed OS as a seed directory (a bootable disk) for seed boot.
	Seed      string
	Kargs     string
	InputHash string
	Cached    bool
	// PackagesDuration is how long mmdebstrap took (zero when its tree was cached).
	PackagesDuration, Duration time.Duration
}

// BuildSystemd writes the systemd OS to o.Dir unless a copy built from the same inputs is
// there. Its Debian tree is cached apart, keyed by the package list and mirror, since
// mmdebstrap takes minutes while the agent changes with every commit.
func BuildSystemd(ctx context.Context, o SystemdOptions) (SystemdOS, error) {
	start := time.Now()
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Dir == "" {
		return SystemdOS{}, errors.New("systemd conformance OS: no output directory")
	}
	res := SystemdOS{Kernel: filepath.Join(o.Dir, "vmlinuz"), Initrd: filepath.Join(o.Dir, "initrd.img"),
		Root: filepath.Join(o.Dir, "root.img"), Seed: filepath.Join(o.Dir, SystemdSeedDirName), Kargs: SystemdKargs}
	unlock, err := lockOutput(ctx, res.Root)
	if err != nil {
		return res, err
	}
	defer unlock()
	in, err := systemdInputs(ctx, o, o.Dir)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(in.work)
	res.PackagesDuration, res.InputHash = in.packagesTime, in.hash
	stamp := res.Root + ".inputs"
	if b, err := os.ReadFile(stamp); err == nil && !o.Force && strings.TrimSpace(string(b)) == res.InputHash {
		res.Cached, res.Duration = true, time.Since(start)
		o.Log.Info("systemd conformance OS is up to date", "dir", o.Dir, "inputs", res.InputHash[:12])
		return res, nil
	}
	if err := assembleSystemd(ctx, in, res); err != nil {
		return res, err
	}
	if err := writeSystemdSeed(ctx, in.work, res.Root, res.Seed, res.InputHash); err != nil {
		return res, err
	}
	if err := pipeline.WriteFileAtomic(stamp, []byte(res.InputHash+"\n"), 0o644); err != nil {
		return res, fmt.Errorf("systemd conformance OS stamp: %w", err)
	}
	res.Duration = time.Since(start)
	o.Log.Info("built the systemd conformance OS", "dir", o.Dir, "kernel", in.kver, "duration", res.Duration.Round(time.Second))
	return res, nil
}

// systemdInput is what the systemd OS is built from: the kernel, the cached Debian tree,
// the agent, the initramfs, and their hash; work is a directory the caller removes.
type systemdInput struct {
	kernel, kver, tarball, agent, work, hash string
	initrd                                   *tree
	packagesTime                             time.Duration
}

// systemdInputs checks the host's tools and gathers the inputs, making the Debian tree
// and the agent when they are missing; work goes in workParent.
func systemdInputs(ctx context.Context, o SystemdOptions, workParent string) (in systemdInput, err error) {
	for _, tool := range []string{"mmdebstrap", "mke2fs", "depmod", "tar", "extlinux", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return in, fmt.Errorf("the systemd conformance OS needs %s (Debian packages mmdebstrap, e2fsprogs, kmod, tar, extlinux, mount): %w", tool, err)
		}
	}
	if in.kernel, in.kver, err = findKernel(o.Kernel); err != nil {
		return in, err
	}
	if in.work, err = os.MkdirTemp(absOrSelf(workParent), ".systemd-*"); err != nil {
		return in, fmt.Errorf("systemd conformance OS work dir: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(in.work)
		}
	}()
	if in.tarball, in.packagesTime, err = debianTree(ctx, o); err != nil {
		return in, err
	}
	if in.agent = o.AgentBinary; in.agent == "" {
		in.agent = filepath.Join(in.work, "snofactory")
		if err := buildAgent(ctx, o.ModuleDir, in.agent); err != nil {
			return in, err
		}
	}
	if in.initrd, err = systemdInitrd(ctx, in.kver); err != nil {
		return in, err
	}
	in.hash, err = systemdHash(in.kernel, in.kver, in.tarball, in.agent, in.initrd)
	return in, err
}

// systemdHash covers every input of the root image, the initramfs and the kernel.
func systemdHash(kernel, kver, tree, agent string, initrd *tree) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nkernel %s\n", systemdVersion, kver)
	for _, f := range []string{kernel, tree + ".inputs", agent} {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	if err := initrd.hash(h); err != nil {
		return "", err
	}
	if err := hashEmbedded(h); err != nil {
		return "", err
	}
	order, err := moduleOrder(kver, systemdRootModules)
	if err != nil {
		return "", err
	}
	for _, rel := range order {
		fmt.Fprintf(h, "module %s\n", rel)
		if err := hashFile(h, filepath.Join("/lib/modules", kver, rel)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashEmbedded(h io.Writer) error {
	return fs.WalkDir(systemdFiles, "systemd", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := systemdFiles.ReadFile(p)
		fmt.Fprintf(h, "embedded %s %d\n", p, len(b))
		h.Write(b)
		return err
	})
}

// CachedSystemd returns the module's systemd conformance OS (DefaultSystemdDir), building
// it first if it is missing or stale, as Cached does the ISO.
func CachedSystemd(ctx context.Context, log *slog.Logger) (SystemdOS, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return SystemdOS{}, fmt.Errorf("finding the snofactory module: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return SystemdOS{}, errors.New("finding the snofactory module: not inside it")
	}
	root := filepath.Dir(gomod)
	return BuildSystemd(ctx, SystemdOptions{Dir: filepath.Join(root, DefaultSystemdDir), ModuleDir: root, Log: log})
}
