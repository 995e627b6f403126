package precachedisk

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

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Align is what a disk's size is a whole multiple of: a MiB, a size every hypervisor accepts.
const Align = 1 << 20

// Write packs the layout in dir as the raw disk image at path and returns its size. progress,
// if not nil, is called with the blob bytes written so far and their total.
func Write(ctx context.Context, dir, path string, progress func(done, total int64)) (int64, error) {
	names, total, err := layoutFiles(dir)
	if err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("creating precache disk: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	var done int64
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := writeEntry(tw, dir, name)
		if err != nil {
			return 0, fmt.Errorf("writing %s to the precache disk %s: %w", name, path, err)
		}
		done += n
		if progress != nil {
			progress(done, total)
		}
	}
	if err := tw.Close(); err != nil {
		return 0, fmt.Errorf("writing precache disk %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("writing precache disk %s: %w", path, err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, fmt.Errorf("writing precache disk %s: %w", path, err)
	}
	if pad := (Align - size%Align) % Align; pad > 0 {
		if _, err := f.Write(make([]byte, pad)); err != nil {
			return 0, fmt.Errorf("writing precache disk %s: %w", path, err)
		}
		size += pad
	}
	return size, f.Close()
}

// layoutFiles lists the files of the layout in dir in disk order (oci-layout, index.json,
// then the blobs by name) with their total size, refusing any file a reader would refuse.
func layoutFiles(dir string) ([]string, int64, error) {
	var names []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if !d.Type().IsRegular() || !entryName.MatchString(name) {
			return fmt.Errorf("%s is not part of a precache disk layout", name)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		names = append(names, name)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing OCI layout %s: %w", dir, err)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names, total, nil
}

// rank puts the magic (oci-layout) first, the agent second and the index third.
func rank(name string) int {
	switch name {
	case ocispec.ImageLayoutFile:
		return 0
	case AgentEntry:
		return 1
	case ocispec.ImageIndexFile:
		return 2
	}
	return 3
}

// writeEntry writes one file of the layout to the archive and returns its size. Owner, mode
// and time are fixed, so a disk depends on nothing but the layout's content.
func writeEntry(tw *tar.Writer, dir, name string) (int64, error) {
	in, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	mode := int64(0o444)
	if name == AgentEntry {
		mode = 0o555
	}
	hdr := &tar.Header{Name: name, Mode: mode, Size: fi.Size(), ModTime: time.Unix(0, 0).UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return 0, err
	}
	return io.Copy(tw, in)
}
