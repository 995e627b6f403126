package precache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/opencontainers/go-digest"
)

// RefNameAnnotation names an image in an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// ociIndex is index.json of an OCI layout.
type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      digest.Digest     `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LayoutStats says how a layout's blobs were placed.
type LayoutStats struct {
	Blobs       int   `json:"blobs"`
	Linked      int   `json:"linked"`
	BytesCopied int64 `json:"bytesCopied"`
}

// WriteLayout writes an OCI image layout in dir with one index entry per image, annotated
// with its pinned reference. Blobs are hardlinks into the store, so writing a layout copies
// nothing unless the store is on another filesystem.
func (res *Result) WriteLayout(dir string, st *Store) (LayoutStats, error) {
	var stats LayoutStats
	blobDir := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return stats, fmt.Errorf("creating OCI layout: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return stats, fmt.Errorf("creating OCI layout: %w", err)
	}
	idx := ociIndex{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json", Manifests: []ociDescriptor{}}
	seen := map[digest.Digest]bool{}
	place := func(d digest.Digest) error {
		if seen[d] {
			return nil
		}
		seen[d] = true
		stats.Blobs++
		dst := filepath.Join(blobDir, d.Encoded())
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
	for _, im := range res.images {
		for _, m := range im.manifests {
			if err := place(m.Digest); err != nil {
				return stats, err
			}
		}
		for _, b := range im.blobs {
			if err := place(b.Digest); err != nil {
				return stats, err
			}
		}
		top := im.manifests[0]
		idx.Manifests = append(idx.Manifests, ociDescriptor{
			MediaType:   top.MediaType,
			Digest:      top.Digest,
			Size:        top.Size,
			Annotations: map[string]string{RefNameAnnotation: im.Ref},
		})
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return stats, err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), append(b, '\n'), 0o644); err != nil {
		return stats, fmt.Errorf("writing OCI layout index: %w", err)
	}
	return stats, nil
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
	return n, err
}
