package seal

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/klauspost/compress/zstd"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// Seed disk file names, by format.
const (
	QCOW2File = "disk.qcow2"
	RawFile   = "disk.raw.zst"
	PackFile  = seed.PackFile
	IndexFile = seed.IndexFile
)

// writeDisks converts the sealed overlay at work into each format in dir and describes
// them for the manifest. qemu-img writes only allocated, non-zero clusters, so the blocks
// the node trimmed and every hole stay out of every form (diskpack skips holes and zeros).
func writeDisks(ctx context.Context, work, dir string, formats []string, env *pipeline.Env) ([]seed.Disk, error) {
	if len(formats) == 0 {
		formats = []string{seed.FormatChunked}
	}
	var disks []seed.Disk
	for _, f := range formats {
		var file string
		switch f {
		case seed.FormatChunked:
			d, err := writeChunked(ctx, work, dir, env)
			if err != nil {
				return nil, err
			}
			env.Log.Info("seed disk written", "file", d.File, "bytes", d.Size, "index", d.Index.File,
				"virtual_bytes", d.VirtualSize, "digest", d.Digest.String())
			disks = append(disks, d)
			continue
		case seed.FormatQCOW2:
			file = QCOW2File
			if err := qemuImg(ctx, "convert", "-q", "-c", "-O", "qcow2", work, filepath.Join(dir, file)); err != nil {
				return nil, err
			}
			// 0600: an OpenShift seed keeps the cluster's private keys on its disk.
			if err := os.Chmod(filepath.Join(dir, file), 0o600); err != nil {
				return nil, err
			}
		case seed.FormatRaw:
			file = RawFile
			raw := filepath.Join(env.Scratch, "disk.raw")
			if err := qemuImg(ctx, "convert", "-q", "-O", "raw", work, raw); err != nil {
				return nil, err
			}
			if err := os.Chmod(raw, 0o600); err != nil {
				return nil, err
			}
			if err := compressZstd(ctx, raw, filepath.Join(dir, file)); err != nil {
				return nil, err
			}
			if err := os.Remove(raw); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("seed disk format %q is not chunked, qcow2 or raw", f)
		}
		d, err := seed.DescribeDisk(ctx, dir, file, f)
		if err != nil {
			return nil, err
		}
		env.Log.Info("seed disk written", "file", file, "bytes", d.Size, "virtual_bytes", d.VirtualSize, "digest", d.Digest.String())
		disks = append(disks, d)
	}
	return disks, nil
}

// writeChunked converts the overlay to a sparse raw disk in scratch and packs it as
// content-defined chunks, so that a later seed sharing content moves as a delta.
func writeChunked(ctx context.Context, work, dir string, env *pipeline.Env) (seed.Disk, error) {
	raw := filepath.Join(env.Scratch, "disk.raw")
	// 0600 before qemu-img fills it: the disk keeps the cluster's private keys.
	if err := os.WriteFile(raw, nil, 0o600); err != nil {
		return seed.Disk{}, err
	}
	defer os.Remove(raw)
	if err := qemuImg(ctx, "convert", "-q", "-O", "raw", work, raw); err != nil {
		return seed.Disk{}, err
	}
	return seed.PackDisk(ctx, raw, dir)
}

// compressZstd writes src compressed to dst, using every core.
func compressZstd(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	enc, err := zstd.NewWriter(out, zstd.WithEncoderConcurrency(runtime.NumCPU()))
	if err != nil {
		return err
	}
	if _, err := io.Copy(enc, ctxio.Reader(ctx, in)); err != nil {
		enc.Close()
		return fmt.Errorf("compressing %s: %w", filepath.Base(src), err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("compressing %s: %w", filepath.Base(src), err)
	}
	return out.Close()
}
