package precachedisk

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// tarBlock is tar's record size; an archive ends with two zero records.
const tarBlock = 512

// Extract unpacks the disk read from r into dir and returns the images of its index. It checks
// every blob against its digest and refuses a disk that is not one Write makes: another magic
// or layout version, unknown names, links, duplicates, a truncated archive, or an index naming
// a manifest the disk lacks. The padding after the archive is not read.
func Extract(ctx context.Context, r io.Reader, dir string) ([]Image, error) {
	if err := os.MkdirAll(filepath.Join(dir, ocispec.ImageBlobsDir, digest.SHA256.String()), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	x := &extractor{cr: &countReader{r: r}, dir: dir, sizes: map[string]int64{}}
	x.tr = tar.NewReader(x.cr)
	if err := x.run(ctx); err != nil {
		return nil, err
	}
	return x.images, nil
}

// run reads the whole archive and checks it is a whole disk.
func (x *extractor) run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		more, err := x.next()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("precache disk is truncated: %w", err)
		}
		if err != nil {
			return err
		}
		if !more {
			return x.finish()
		}
	}
}

// extractor is the state of one Extract or Open.
type extractor struct {
	cr  *countReader
	tr  *tar.Reader
	dir string // where Extract unpacks; "" when Open only indexes
	// spans are where Open found each blob's bytes on the disk.
	spans  map[digest.Digest]span
	seeker io.Seeker
	sizes  map[string]int64 // entries unpacked so far, by name
	images []Image          // from index.json
	// agentWant is the agent digest index.json records, agentGot the agent entry's.
	agentWant, agentGot digest.Digest
}

// next unpacks the archive's next entry; more is false at the end of the archive.
func (x *extractor) next() (more bool, err error) {
	before := x.cr.n
	hdr, err := x.tr.Next()
	switch {
	case errors.Is(err, io.EOF) && len(x.sizes) == 0:
		return false, fmt.Errorf("not a precache disk: it holds no %s", ocispec.ImageLayoutFile)
	case errors.Is(err, io.EOF):
		// tar reports a clean end both after its end-of-archive records and when the disk is
		// cut off between two entries; only the first is a whole disk.
		if x.cr.n-before < 2*tarBlock {
			return false, io.ErrUnexpectedEOF
		}
		return false, nil
	case err != nil && len(x.sizes) == 0:
		return false, fmt.Errorf("not a precache disk: %w", err)
	case err != nil:
		return false, fmt.Errorf("reading precache disk: %w", err)
	}
	if err := x.admit(hdr); err != nil {
		return false, err
	}
	if err := x.unpack(hdr); err != nil {
		return false, err
	}
	x.sizes[hdr.Name] = hdr.Size
	return true, nil
}

// admit refuses an entry Write does not make, or does not make there.
func (x *extractor) admit(hdr *tar.Header) error {
	_, dup := x.sizes[hdr.Name]
	switch {
	case hdr.Typeflag != tar.TypeReg || !entryName.MatchString(hdr.Name):
		return fmt.Errorf("precache disk holds unexpected entry %q", hdr.Name)
	case len(x.sizes) == 0 && hdr.Name != ocispec.ImageLayoutFile:
		return fmt.Errorf("not a precache disk: it starts with %q, not %s", hdr.Name, ocispec.ImageLayoutFile)
	case dup:
		return fmt.Errorf("precache disk holds %s twice", hdr.Name)
	case hdr.Name == AgentEntry && len(x.sizes) != 1:
		return fmt.Errorf("precache disk holds %s out of place (it must follow %s)", AgentEntry, ocispec.ImageLayoutFile)
	}
	return nil
}

// unpack writes the current entry below dir: the layout and index files after checking them,
// a blob after checking it against its name.
func (x *extractor) unpack(hdr *tar.Header) error {
	dst := filepath.Join(x.dir, filepath.FromSlash(hdr.Name))
	if hdr.Name == AgentEntry {
		// The images do not need the agent: hash it, do not store it.
		dg := digest.SHA256.Digester()
		if _, err := io.Copy(dg.Hash(), x.tr); err != nil {
			return fmt.Errorf("reading %s from the precache disk: %w", hdr.Name, err)
		}
		x.agentGot = dg.Digest()
		return nil
	}
	isBlob := path.Dir(hdr.Name) == path.Join(ocispec.ImageBlobsDir, digest.SHA256.String())
	if isBlob && x.dir == "" {
		// Open: remember where the blob is; tar seeks past it.
		off, err := x.seeker.Seek(0, io.SeekCurrent)
		if err != nil {
			return fmt.Errorf("indexing precache disk: %w", err)
		}
		x.spans[digest.NewDigestFromEncoded(digest.SHA256, path.Base(hdr.Name))] = span{off: off, size: hdr.Size}
		return nil
	}
	if !isBlob {
		b, err := io.ReadAll(io.LimitReader(x.tr, maxIndex+1))
		switch {
		case err != nil:
			return fmt.Errorf("reading %s from the precache disk: %w", hdr.Name, err)
		case len(b) > maxIndex:
			return fmt.Errorf("precache disk %s is larger than %d bytes", hdr.Name, maxIndex)
		case hdr.Name == ocispec.ImageLayoutFile:
			err = checkLayoutFile(b)
		default:
			x.agentWant, x.images, err = parseIndexAgent(b)
		}
		if err != nil || x.dir == "" {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	}
	return unpackBlob(x.tr, dst, digest.NewDigestFromEncoded(digest.SHA256, path.Base(hdr.Name)))
}

// unpackBlob copies a blob to dst by way of a temporary file, so dst exists only once the
// content has matched d.
func unpackBlob(r io.Reader, dst string, d digest.Digest) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".extract-*")
	if err != nil {
		return fmt.Errorf("extracting blob %s: %w", d, err)
	}
	defer os.Remove(f.Name())
	v := d.Verifier()
	_, err = io.Copy(io.MultiWriter(f, v), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("extracting blob %s: %w", d, err)
	}
	if !v.Verified() {
		return fmt.Errorf("precache disk is corrupt: blob %s does not match its digest", d)
	}
	return os.Rename(f.Name(), dst)
}

// finish checks that the disk held a whole layout: its index, and every manifest it names.
func (x *extractor) finish() error {
	if _, ok := x.sizes[ocispec.ImageIndexFile]; !ok {
		return fmt.Errorf("precache disk holds no %s", ocispec.ImageIndexFile)
	}
	if x.agentWant != x.agentGot {
		switch {
		case x.agentGot == "":
			return fmt.Errorf("precache disk lacks its agent %s (%s)", AgentEntry, x.agentWant)
		case x.agentWant == "":
			return fmt.Errorf("precache disk holds an agent its %s does not record", ocispec.ImageIndexFile)
		default:
			return fmt.Errorf("precache disk is corrupt: %s is %s, its index records %s", AgentEntry, x.agentGot, x.agentWant)
		}
	}
	for _, im := range x.images {
		name := path.Join(ocispec.ImageBlobsDir, im.Digest.Algorithm().String(), im.Digest.Encoded())
		size, ok := x.sizes[name]
		if !ok || size != im.Size {
			return fmt.Errorf("precache disk lacks manifest %s of %s (%d bytes)", im.Digest, im.Ref, im.Size)
		}
	}
	return nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// countSeeker is a countReader tar can seek through (it skips an entry's bytes with Seek when
// its reader has one); n stays the position.
type countSeeker struct {
	*countReader
	s io.Seeker
}

func (c countSeeker) Seek(off int64, whence int) (int64, error) {
	pos, err := c.s.Seek(off, whence)
	if err == nil {
		c.n = pos
	}
	return pos, err
}
