package precache

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// diskAlign pads the data disk to a whole number of MiB, a size every hypervisor accepts.
const diskAlign = 1 << 20

// WriteDisk packages the OCI layout in dir as a raw tar-on-disk image at path: an
// uncompressed POSIX tar (oci-layout, index.json, then blobs, names sorted), zero-padded to
// a MiB boundary. It needs no root, no loop device and no filesystem driver on either side;
// the node reads it straight off the block device (seeds/imports). Entries carry fixed
// owners, modes and times, so the same layout always gives the same disk.
func WriteDisk(ctx context.Context, dir, path string, progress func(done, total int64)) (int64, error) {
	var files []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing OCI layout %s: %w", dir, err)
	}
	rank := func(p string) int {
		switch p {
		case "oci-layout":
			return 0
		case "index.json":
			return 1
		}
		return 2
	}
	sort.Slice(files, func(i, j int) bool {
		if ri, rj := rank(files[i]), rank(files[j]); ri != rj {
			return ri < rj
		}
		return files[i] < files[j]
	})
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("creating data disk: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	cw := &countWriter{w: bw}
	tw := tar.NewWriter(cw)
	epoch := time.Unix(0, 0).UTC()
	var done int64
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		hdr := &tar.Header{Name: name, Mode: 0o444, Size: fi.Size(), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return 0, fmt.Errorf("writing data disk: %w", err)
		}
		in, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(tw, in)
		in.Close()
		if err != nil {
			return 0, fmt.Errorf("writing %s to the data disk: %w", name, err)
		}
		done += n
		if progress != nil {
			progress(done, total)
		}
	}
	if err := tw.Close(); err != nil {
		return 0, fmt.Errorf("writing data disk: %w", err)
	}
	if pad := (diskAlign - cw.n%diskAlign) % diskAlign; pad > 0 {
		if _, err := cw.Write(make([]byte, pad)); err != nil {
			return 0, fmt.Errorf("writing data disk: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("writing data disk: %w", err)
	}
	return cw.n, f.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
