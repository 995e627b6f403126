package precache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
)

// LayoutStats says how a layout's blobs were placed.
type LayoutStats struct {
	Blobs       int   `json:"blobs"`
	Linked      int   `json:"linked"`
	BytesCopied int64 `json:"bytesCopied"`
}

// WriteLayout writes the OCI image layout of the precache data disk (seeds/contract/precachedisk) in
// dir, with one index entry per image named by its pinned reference. Blobs are hardlinks into
// the store, so writing a layout copies nothing unless the store is on another filesystem.
func (res *Result) WriteLayout(dir string, st *blobstore.Store) (LayoutStats, error) {
	var stats LayoutStats
	if err := precachedisk.CreateLayout(dir); err != nil {
		return stats, err
	}
	seen := map[digest.Digest]bool{}
	var index []precachedisk.Image
	for _, im := range res.images {
		for _, d := range im.manifests {
			if err := placeBlob(st, dir, d.Digest, seen, &stats); err != nil {
				return stats, err
			}
		}
		for _, d := range im.blobs {
			if err := placeBlob(st, dir, d.Digest, seen, &stats); err != nil {
				return stats, err
			}
		}
		top := im.manifests[0]
		index = append(index, precachedisk.Image{Ref: im.Ref, MediaType: top.MediaType, Digest: top.Digest, Size: top.Size})
	}
	return stats, precachedisk.WriteIndex(dir, index)
}

// placeBlob puts blob d of the store into the layout in dir once: a hardlink where the
// filesystem allows it, else a copy.
func placeBlob(st *blobstore.Store, dir string, d digest.Digest, seen map[digest.Digest]bool, stats *LayoutStats) error {
	if seen[d] {
		return nil
	}
	seen[d] = true
	stats.Blobs++
	dst := precachedisk.BlobPath(dir, d)
	err := os.Link(st.Path(d), dst)
	switch {
	case err == nil:
		stats.Linked++
		return nil
	case errors.Is(err, os.ErrExist):
		return nil
	case errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK):
		n, err := copyFile(st.Path(d), dst)
		stats.BytesCopied += n
		return err
	default:
		return fmt.Errorf("linking blob %s into the layout: %w", d, err)
	}
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("copying blob %s into the layout: %w", src, err)
	}
	return n, nil
}
