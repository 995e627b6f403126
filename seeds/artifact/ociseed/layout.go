package ociseed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// layoutStore is an OCI image layout directory. Blobs are written to a temporary name and
// renamed once their digest checks, so a blob file that exists is complete: a re-run push
// skips it. (go-containerregistry's layout writes blobs in place, which a killed push
// would leave half-written under their final name.)
type layoutStore struct {
	dir, tag string
}

func (l *layoutStore) blobPath(d digest.Digest) string {
	return filepath.Join(l.dir, ocispec.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}

func (l *layoutStore) putBlob(ctx context.Context, b blob) (int64, error) {
	p := l.blobPath(b.desc.Digest)
	if fi, err := os.Stat(p); err == nil && fi.Size() == b.desc.Size {
		return 0, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return 0, fmt.Errorf("writing %s to %s: %w", b.what, l.dir, err)
	}
	rc, err := b.open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := writeVerified(ctx, p, rc, b.desc)
	if err != nil {
		return n, fmt.Errorf("writing %s to %s: %w", b.what, l.dir, err)
	}
	return n, nil
}

// writeVerified copies r to path through a temporary file, renaming it only when its size
// and digest are d's.
func writeVerified(ctx context.Context, path string, r io.Reader, d ocispec.Descriptor) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".partial-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	dg := d.Digest.Algorithm().Digester()
	n, err := io.Copy(io.MultiWriter(f, dg.Hash()), ctxio.Reader(ctx, r))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if n != d.Size || dg.Digest() != d.Digest {
		return n, fmt.Errorf("content has digest %s (%d bytes), want %s (%d bytes)", dg.Digest(), n, d.Digest, d.Size)
	}
	return n, os.Rename(f.Name(), path)
}

func (l *layoutStore) putManifest(ctx context.Context, raw []byte, tagged bool) error {
	desc, err := putManifestBlob(ctx, l.putBlob, raw)
	if err != nil {
		return err
	}
	idx, err := l.index()
	if err != nil {
		return err
	}
	kept := idx.Manifests[:0]
	for _, m := range idx.Manifests {
		if m.Digest == desc.Digest && m.Annotations[ocispec.AnnotationRefName] == "" ||
			tagged && m.Annotations[ocispec.AnnotationRefName] == l.tag {
			continue
		}
		kept = append(kept, m)
	}
	if tagged {
		desc.Annotations = map[string]string{ocispec.AnnotationRefName: l.tag}
	}
	idx.Manifests = append(kept, desc)
	return l.writeIndex(idx)
}

func (l *layoutStore) index() (ocispec.Index, error) {
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	b, err := smallfile.Read(filepath.Join(l.dir, ocispec.ImageIndexFile), maxMetadata)
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if errors.Is(err, smallfile.ErrNotRegular) || errors.Is(err, smallfile.ErrTooLarge) {
		// A FIFO, a device or a huge file is the user's layout, not a failure to retry.
		return idx, badinput.Errorf("reading the OCI layout index: %w", err)
	}
	if err != nil {
		return idx, fmt.Errorf("reading the OCI layout index: %w", err)
	}
	if err := strictjson.DecodeOpen(b, &idx); err != nil {
		return idx, fmt.Errorf("reading %s: %w", filepath.Join(l.dir, ocispec.ImageIndexFile), err)
	}
	return idx, nil
}

func (l *layoutStore) writeIndex(idx ocispec.Index) error {
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	ib, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("encoding the OCI layout index: %w", err)
	}
	for name, b := range map[string][]byte{ocispec.ImageLayoutFile: layout, ocispec.ImageIndexFile: ib} {
		if err := writeFileAtomic(filepath.Join(l.dir, name), b); err != nil {
			return err
		}
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".partial-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func (l *layoutStore) checksDigests() bool { return false }

func (l *layoutStore) hasManifest(_ context.Context, d digest.Digest) (bool, error) {
	idx, err := l.index()
	if err != nil {
		return false, nil
	}
	for _, m := range idx.Manifests {
		if m.Digest == d {
			_, err := os.Stat(l.blobPath(d))
			return err == nil, nil
		}
	}
	return false, nil
}

func (l *layoutStore) commit() error { return nil }
func (l *layoutStore) abort()        {}
func (l *layoutStore) close() error  { return nil }

func (l *layoutStore) resolve(ctx context.Context) (ocispec.Descriptor, []byte, error) {
	idx, err := l.index()
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	d, err := pickManifest(idx, l.tag, "oci:"+l.dir)
	if err != nil {
		return d, nil, err
	}
	raw, err := readBlob(ctx, l, d, maxMetadata)
	return d, raw, err
}

// pickManifest finds tag in an index; with the default tag and no such name, the only seed
// in the index will do, as containers/image reads a layout with a single image.
func pickManifest(idx ocispec.Index, tag, where string) (ocispec.Descriptor, error) {
	var seeds []ocispec.Descriptor
	for _, m := range idx.Manifests {
		if m.Annotations[ocispec.AnnotationRefName] == tag {
			return m, nil
		}
		if m.ArtifactType == seed.ArtifactType {
			seeds = append(seeds, m)
		}
	}
	if tag == DefaultTag && len(seeds) == 1 {
		return seeds[0], nil
	}
	return ocispec.Descriptor{}, fmt.Errorf("%s: no manifest named %q", where, tag)
}

func (l *layoutStore) fetch(_ context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if err := d.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("blob %q: %w", d.Digest, err)
	}
	// A blob replaced by a FIFO would block the open forever, out of Ctrl-C's reach; a
	// device would never end: the layout is the user's, so either is bad input.
	f, err := smallfile.Open(l.blobPath(d.Digest))
	if errors.Is(err, smallfile.ErrNotRegular) {
		return nil, badinput.Errorf("reading blob %s of %s: %w", d.Digest, l.dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", d.Digest, err)
	}
	return f, nil
}

func (l *layoutStore) manifest(ctx context.Context, d ocispec.Descriptor) ([]byte, error) {
	return readBlob(ctx, l, d, maxMetadata)
}

func (l *layoutStore) referrers(ctx context.Context, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	idx, err := l.index()
	if err != nil {
		return nil, err
	}
	return referrersInIndex(ctx, l, idx, subject)
}
