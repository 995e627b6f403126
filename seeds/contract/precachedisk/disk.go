package precachedisk

import (
	"archive/tar"
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
)

// Disk is a precache disk read in place: its index and where each blob's bytes lie, so a
// reader takes one blob at a time off the device instead of unpacking the whole layout (which
// needs a scratch filesystem as large as the disk).
type Disk struct {
	r      io.ReaderAt
	images []Image
	spans  map[digest.Digest]span
}

// span is where an entry's bytes lie on the disk.
type span struct{ off, size int64 }

// Open reads the disk's tar headers (seeking past the blobs' bytes) and refuses what Extract
// refuses, except a blob whose bytes do not match its name: Blob finds that when it is read.
func Open(ctx context.Context, f io.ReadSeeker) (*Disk, error) {
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return nil, fmt.Errorf("precache disk: %T cannot be read at an offset", f)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("precache disk: %w", err)
	}
	cr := &countReader{r: f}
	x := &extractor{cr: cr, sizes: map[string]int64{}, spans: map[digest.Digest]span{}, seeker: f}
	x.tr = tar.NewReader(countSeeker{countReader: cr, s: f})
	if err := x.run(ctx); err != nil {
		return nil, err
	}
	return &Disk{r: ra, images: x.images, spans: x.spans}, nil
}

// Images are the named and unnamed images of the disk's index, in order.
func (d *Disk) Images() []Image { return d.images }

// Has says whether the disk holds blob dg.
func (d *Disk) Has(dg digest.Digest) bool {
	_, ok := d.spans[dg]
	return ok
}

// Blob returns a reader of blob dg and its size. The reader fails at its end, rather than
// return io.EOF, when the bytes do not match dg. Readers may be used concurrently.
func (d *Disk) Blob(dg digest.Digest) (io.ReadCloser, int64, error) {
	s, ok := d.spans[dg]
	if !ok {
		return nil, 0, fmt.Errorf("precache disk holds no blob %s", dg)
	}
	if err := dg.Validate(); err != nil {
		return nil, 0, err
	}
	return &verifier{r: io.NewSectionReader(d.r, s.off, s.size), v: dg.Verifier(), dg: dg}, s.size, nil
}

// ReadBlob reads a whole small blob (a manifest or a config), checked.
func (d *Disk) ReadBlob(dg digest.Digest) ([]byte, error) {
	rc, size, err := d.Blob(dg)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > maxIndex {
		return nil, fmt.Errorf("precache disk blob %s is %d bytes, too large to read whole", dg, size)
	}
	return io.ReadAll(rc)
}

// verifier passes a blob's bytes through and checks them against its digest at the end.
type verifier struct {
	r  io.Reader
	v  digest.Verifier
	dg digest.Digest
}

func (v *verifier) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	v.v.Write(b[:n])
	if err == io.EOF && !v.v.Verified() {
		return n, fmt.Errorf("precache disk is corrupt: blob %s does not match its digest", v.dg)
	}
	return n, err
}

func (v *verifier) Close() error { return nil }
