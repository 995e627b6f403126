package seed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

// A chunked disk's files in a seed directory.
const (
	PackFile  = "disk.pack"
	IndexFile = "disk.index"
)

// PackDisk packs a sealed raw disk into dir as the seed's chunked disk (PackFile and
// IndexFile) and describes it for the manifest: the packaging the seal stage gives every
// seed, the conformance OSes' too.
func PackDisk(ctx context.Context, raw, dir string) (Disk, error) {
	fi, err := os.Stat(raw)
	if err != nil {
		return Disk{}, err
	}
	sums, err := diskpack.PackFiles(ctx, raw, filepath.Join(dir, PackFile), filepath.Join(dir, IndexFile), diskpack.ParamsFor(fi.Size()))
	if err != nil {
		return Disk{}, fmt.Errorf("packing the sealed disk: %w", err)
	}
	return DescribeChunked(dir, PackFile, IndexFile, sums)
}
