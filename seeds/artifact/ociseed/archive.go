package ociseed

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sync"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// archiveWriter writes an oci-archive (an OCI layout as a tar file) in one pass: each
// blob once, then index.json and oci-layout. It writes into the file pipeline/output hands
// it (Push writes the archive through output.Write), so FILE is refused, or is either the
// old archive or the whole new one, by the same rules as every other output.
type archiveWriter struct {
	mu      sync.Mutex // the tar stream is sequential
	tw      *tar.Writer
	final   string
	tag     string
	written map[digest.Digest]bool
	index   ocispec.Index
}

func newArchiveWriter(f *os.File, loc Location) *archiveWriter {
	return &archiveWriter{tw: tar.NewWriter(f), final: loc.Path, tag: loc.Tag, written: map[digest.Digest]bool{},
		index: ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}}
}

func (a *archiveWriter) putBlob(ctx context.Context, b blob) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written[b.desc.Digest] {
		return 0, nil
	}
	rc, err := b.open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	name := path.Join(ocispec.ImageBlobsDir, b.desc.Digest.Algorithm().String(), b.desc.Digest.Encoded())
	if err := a.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.desc.Size, Typeflag: tar.TypeReg}); err != nil {
		return 0, fmt.Errorf("writing %s to %s: %w", b.what, a.final, err)
	}
	n, err := io.Copy(a.tw, ctxio.Reader(ctx, rc))
	if err != nil {
		return n, fmt.Errorf("writing %s to %s: %w", b.what, a.final, err)
	}
	a.written[b.desc.Digest] = true
	return n, nil
}

func (a *archiveWriter) putManifest(ctx context.Context, raw []byte, tagged bool) error {
	desc, err := putManifestBlob(ctx, a.putBlob, raw)
	if err != nil {
		return err
	}
	if tagged {
		desc.Annotations = map[string]string{ocispec.AnnotationRefName: a.tag}
	}
	a.mu.Lock()
	a.index.Manifests = append(a.index.Manifests, desc)
	a.mu.Unlock()
	return nil
}

// hasManifest: an archive is written whole, every time.
func (a *archiveWriter) hasManifest(context.Context, digest.Digest) (bool, error) { return false, nil }
func (a *archiveWriter) checksDigests() bool                                      { return false }

func (a *archiveWriter) commit() error {
	ib, err := json.Marshal(a.index)
	if err != nil {
		return fmt.Errorf("encoding the archive index: %w", err)
	}
	lb, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	for _, f := range []struct {
		name string
		b    []byte
	}{{ocispec.ImageIndexFile, ib}, {ocispec.ImageLayoutFile, lb}} {
		if err := a.tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.b)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("writing %s: %w", a.final, err)
		}
		if _, err := a.tw.Write(f.b); err != nil {
			return fmt.Errorf("writing %s: %w", a.final, err)
		}
	}
	// output.Write syncs the file and renames it into place once this returns.
	if err := a.tw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", a.final, err)
	}
	return nil
}

// abort: output.Write removes the partial file when the push fails.
func (a *archiveWriter) abort() {}

// archiveReader reads blobs straight out of an oci-archive: one scan of the tar headers
// (seeking over the contents) finds where each file lies, so nothing is extracted.
type archiveReader struct {
	f     *os.File
	where string
	tag   string
	files map[string]*io.SectionReader
}

func openArchive(loc Location) (*archiveReader, error) {
	// O_NONBLOCK and the regular-file check: a FIFO would block the open, a device would
	// feed the tar reader without end.
	f, err := smallfile.Open(loc.Path)
	if err != nil {
		return nil, badinput.Errorf("opening the archive: %w", err)
	}
	a := &archiveReader{f: f, where: "oci-archive:" + loc.Path, tag: loc.Tag, files: map[string]*io.SectionReader{}}
	// tar.Reader reads headers straight from f and seeks over contents, so f's offset after
	// Next is where the entry's content starts.
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading the archive %s: %w", loc.Path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("reading the archive %s: %w", loc.Path, err)
		}
		a.files[path.Clean(h.Name)] = io.NewSectionReader(f, off, h.Size)
	}
	return a, nil
}

func (a *archiveReader) index() (ocispec.Index, error) {
	var idx ocispec.Index
	sr, ok := a.files[ocispec.ImageIndexFile]
	if !ok {
		return idx, fmt.Errorf("%s: no %s: not an OCI archive", a.where, ocispec.ImageIndexFile)
	}
	// The tar header says how long index.json is; believe it only up to maxMetadata.
	if sr.Size() > maxMetadata {
		return idx, fmt.Errorf("%s: %s is larger than %d bytes", a.where, ocispec.ImageIndexFile, maxMetadata)
	}
	b := make([]byte, sr.Size())
	if _, err := sr.ReadAt(b, 0); err != nil {
		return idx, fmt.Errorf("%s: reading %s: %w", a.where, ocispec.ImageIndexFile, err)
	}
	if err := strictjson.DecodeOpen(b, &idx); err != nil {
		return idx, fmt.Errorf("%s: reading %s: %w", a.where, ocispec.ImageIndexFile, err)
	}
	return idx, nil
}

func (a *archiveReader) referrers(ctx context.Context, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	idx, err := a.index()
	if err != nil {
		return nil, err
	}
	return referrersInIndex(ctx, a, idx, subject)
}

func (a *archiveReader) resolve(ctx context.Context) (ocispec.Descriptor, []byte, error) {
	idx, err := a.index()
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	d, err := pickManifest(idx, a.tag, a.where)
	if err != nil {
		return d, nil, err
	}
	raw, err := readBlob(ctx, a, d, maxMetadata)
	return d, raw, err
}

func (a *archiveReader) checksDigests() bool { return false }

func (a *archiveReader) fetch(_ context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	name := path.Join(ocispec.ImageBlobsDir, d.Digest.Algorithm().String(), d.Digest.Encoded())
	sr, ok := a.files[name]
	if !ok {
		return nil, fmt.Errorf("%s: no blob %s", a.where, d.Digest)
	}
	return io.NopCloser(io.NewSectionReader(sr, 0, sr.Size())), nil
}

func (a *archiveReader) manifest(ctx context.Context, d ocispec.Descriptor) ([]byte, error) {
	return readBlob(ctx, a, d, maxMetadata)
}

func (a *archiveReader) close() error { return a.f.Close() }
