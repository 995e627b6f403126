package conformance

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/ctxio"
)

// The systemd OS installed as RHCOS is: a live ISO (the busybox live environment and
// installer of the conformance ISO) whose installer writes the systemd OS's whole disk
// image to the target, as coreos-installer writes the metal image. The disk is the OS as
// it ships, never booted and not sealed: the factory's first boot runs it, the seal comes
// later. Written beside the systemd OS under names of their own (SystemdLiveDirName), so
// builds of the sealed OS and of this one do not replace each other.
const (
	// SystemdLiveDirName is the directory inside SystemdOptions.Dir with metal.img and
	// the live ISO.
	SystemdLiveDirName = "live"
	// SystemdLiveISOName is the live ISO's file name there.
	SystemdLiveISOName = "systemd-live.iso"
	// systemdLiveVersion changes whenever the layout of the metal image changes.
	systemdLiveVersion = "conformance-systemd-live/2"
)

// SystemdLive is a built systemd live ISO and the disk image it installs.
type SystemdLive struct {
	ISO, Metal string
	InputHash  string
	Cached     bool
	Duration   time.Duration
}

// BuildSystemdLive writes the systemd OS's metal image and its live ISO to
// o.Dir/SystemdLiveDirName unless copies built from the same inputs are there.
func BuildSystemdLive(ctx context.Context, o SystemdOptions) (SystemdLive, error) {
	start := time.Now()
	if o.Dir == "" {
		return SystemdLive{}, errors.New("systemd live ISO: no output directory")
	}
	dir := filepath.Join(o.Dir, SystemdLiveDirName)
	res := SystemdLive{ISO: filepath.Join(dir, SystemdLiveISOName), Metal: filepath.Join(dir, "metal.img")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("systemd live ISO: %w", err)
	}
	unlock, err := lockOutput(ctx, res.Metal)
	if err != nil {
		return res, err
	}
	defer unlock()
	in, err := systemdInputs(ctx, o, dir)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(in.work)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", systemdLiveVersion, in.hash)
	// The metal image carries the host's Ignition too (placeFactory).
	if err := hashFile(h, ignitionBin.src); err != nil {
		return res, fmt.Errorf("systemd live ISO: %w", err)
	}
	res.InputHash = hex.EncodeToString(h.Sum(nil))
	stamp := res.Metal + ".inputs"
	if b, err := os.ReadFile(stamp); err != nil || o.Force || strings.TrimSpace(string(b)) != res.InputHash {
		if err := buildMetal(ctx, in, res.Metal); err != nil {
			return res, err
		}
		if err := pipeline.WriteFileAtomic(stamp, []byte(res.InputHash+"\n"), 0o644); err != nil {
			return res, fmt.Errorf("systemd metal image stamp: %w", err)
		}
	} else {
		res.Cached = true
	}
	iso, err := Build(ctx, Options{Out: res.ISO, AgentBinary: in.agent, Kernel: in.kernel, MetalImage: res.Metal, Force: o.Force, Log: o.Log})
	if err != nil {
		return res, fmt.Errorf("systemd live ISO: %w", err)
	}
	res.Cached = res.Cached && iso.Cached
	res.Duration = time.Since(start)
	return res, nil
}

// buildMetal makes the unsealed root (customizeMetal) into a root image and lays it out
// as a bootable disk, as writeSystemdSeed does the sealed one.
func buildMetal(ctx context.Context, in systemdInput, out string) error {
	root := filepath.Join(in.work, "root")
	if err := unpackTree(ctx, in.tarball, root); err != nil {
		return err
	}
	if err := customizeMetal(ctx, root, in.kver, in.agent); err != nil {
		return fmt.Errorf("systemd metal image root: %w", err)
	}
	img := filepath.Join(in.work, "root.img")
	if err := rootImage(ctx, root, in.kernel, in.initrd, img); err != nil {
		return err
	}
	disk := filepath.Join(in.work, "metal.img")
	if err := systemdDisk(ctx, in.work, img, disk); err != nil {
		return fmt.Errorf("the systemd metal image's disk: %w", err)
	}
	if err := os.Rename(disk, out); err != nil {
		return fmt.Errorf("systemd metal image: %w", err)
	}
	return nil
}

// gzipFile compresses src into dst (fast: the image is mostly the OS's binaries and its
// free space), reading sparse holes as the zeros they are.
func gzipFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if err == nil {
		_, err = io.Copy(zw, ctxio.Reader(ctx, in))
		err = errors.Join(err, zw.Close())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("compressing %s: %w", src, err)
	}
	return nil
}

// unpackTree unpacks the cached Debian tree into root.
func unpackTree(ctx context.Context, tarball, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := pipeline.RunTool(ctx, exec.Command("tar", "--numeric-owner", "-xpf", tarball, "-C", root), nil); err != nil {
		return fmt.Errorf("unpacking the systemd conformance OS tree: %w", err)
	}
	return nil
}
