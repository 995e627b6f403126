package seed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

// RawReader streams the raw bytes of disk d of the seed directory dir: a zstd raw disk is
// decompressed on the fly, a chunked disk is assembled from its pack chunk by chunk (each
// checked against its digest); a qcow2 disk is converted by qemu-img into a sparse temporary
// file (qemu-img writes at offsets, so it cannot write to a pipe), which Close removes.
// The temporary file goes under $TMPDIR.
func RawReader(ctx context.Context, dir string, d Disk) (io.ReadCloser, error) {
	if !declaredFormat(d.Format) {
		return nil, &BadSeedError{File: d.File, Problem: fmt.Sprintf("disk format %q is not one a seed may have", d.Format)}
	}
	f, err := openStored(dir, d.File, d.Size)
	if err != nil {
		return nil, err
	}
	switch d.Format {
	case FormatChunked:
		return chunkedReader(ctx, dir, d, f)
	case FormatRaw:
		if d.Compression != CompressionZstd {
			f.Close()
			return nil, &BadSeedError{File: d.File, Problem: fmt.Sprintf("raw disk with compression %q is not supported", d.Compression)}
		}
		// A crafted frame cannot make the decoder take more than a bounded window.
		dec, err := zstd.NewReader(f, zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(maxZstdMemory))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		// One byte past the declared size is enough to show the disk is longer than declared.
		limit := d.VirtualSize + 1
		if d.VirtualSize < 0 {
			limit = math.MaxInt64
		}
		return &zstdReader{dec: dec, f: f, name: d.File, r: io.LimitReader(dec, limit)}, nil
	default: // FormatQCOW2
		if err := checkQCOW2(f, d.File, d.VirtualSize); err != nil {
			f.Close()
			return nil, err
		}
		return qcow2Raw(ctx, f)
	}
}

// ReadIndex reads the chunk index of the chunked disk d in dir, checked against the
// digest and size the manifest gives and against the disk's sizes.
func ReadIndex(dir string, d Disk) (*diskpack.Index, error) {
	if d.Format != FormatChunked || d.Index == nil {
		return nil, &BadSeedError{File: d.File, Problem: "is not a chunked disk"}
	}
	f, err := openStored(dir, d.Index.File, d.Index.Size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, d.Index.Size))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.Index.File, err)
	}
	if got := digest.FromBytes(b); got != d.Index.Digest {
		return nil, &MismatchError{File: d.Index.File, What: "digest", Want: d.Index.Digest, Got: got, WantSize: d.Index.Size, GotSize: int64(len(b))}
	}
	return CheckIndex(b, d)
}

// CheckIndex parses a chunked disk's index (already checked against its digest) and checks
// that it describes disk d: its raw size and its pack's size.
func CheckIndex(b []byte, d Disk) (*diskpack.Index, error) {
	name := d.File
	if d.Index != nil {
		name = d.Index.File
	}
	x, err := diskpack.ParseIndex(b)
	if err != nil {
		return nil, &BadSeedError{File: name, Problem: err.Error()}
	}
	if d.VirtualSize >= 0 && x.Size != d.VirtualSize {
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("describes a disk of %d bytes, the manifest says %d", x.Size, d.VirtualSize)}
	}
	if _, size := x.Blobs(); size != d.Size {
		return nil, &BadSeedError{File: name, Problem: fmt.Sprintf("describes a pack of %d bytes, the manifest says %s holds %d", size, d.File, d.Size)}
	}
	return x, nil
}

// openChunked opens the pack of the chunked disk d in dir with its index, checked against
// the manifest; closeAll closes the reader and the pack.
func openChunked(dir string, d Disk) (r *diskpack.Reader, x *diskpack.Index, closeAll func(), err error) {
	if x, err = ReadIndex(dir, d); err != nil {
		return nil, nil, nil, err
	}
	f, err := openStored(dir, d.File, d.Size)
	if err != nil {
		return nil, nil, nil, err
	}
	if r, err = diskpack.NewReader(f, x, d.File); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	return r, x, func() { r.Close(); f.Close() }, nil
}

// chunkedReader streams the raw disk of a chunked disk from its pack f.
func chunkedReader(ctx context.Context, dir string, d Disk, f *os.File) (io.ReadCloser, error) {
	x, err := ReadIndex(dir, d)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := diskpack.NewReader(f, x, d.File)
	if err != nil {
		f.Close()
		return nil, err
	}
	s := r.Stream(ctx)
	return &closers{ReadCloser: s, after: func() error { r.Close(); return f.Close() }}, nil
}

// closers closes its reader, then runs after.
type closers struct {
	io.ReadCloser
	after func() error
}

func (c *closers) Close() error { return errors.Join(c.ReadCloser.Close(), c.after()) }

// Bounds on decompressing a seed's raw disk: zstd levels up to 19 use windows of at most
// 8 MiB; long-distance matching at most 128 MiB.
const (
	maxZstdWindow = 128 << 20
	maxZstdMemory = 1 << 40 // the output itself is bounded by the declared size
)

type zstdReader struct {
	dec  *zstd.Decoder
	f    *os.File
	name string
	r    io.Reader // dec, bounded
}

func (z *zstdReader) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("decompressing %s: %w", z.name, err)
	}
	return n, err
}

func (z *zstdReader) Close() error {
	z.dec.Close()
	return z.f.Close()
}

// qcow2Raw converts the qcow2 image f (checked by checkQCOW2) into a raw temporary file.
// qemu-img reads the very file that was checked, through its descriptor, with the format
// given: it probes nothing and opens nothing else.
func qcow2Raw(ctx context.Context, f *os.File) (io.ReadCloser, error) {
	defer f.Close()
	name := filepath.Base(f.Name())
	tmp, err := os.MkdirTemp("", "snofactory-seed-raw-")
	if err != nil {
		return nil, fmt.Errorf("converting %s to raw: %w", name, err)
	}
	out := filepath.Join(tmp, "disk.raw")
	// 0600 before qemu-img fills it (it keeps an existing file's mode): the disk keeps the
	// cluster's private keys.
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("converting %s to raw: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", FormatQCOW2, "-O", FormatRaw, "/dev/fd/3", out)
	cmd.ExtraFiles = []*os.File{f}
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("converting %s to raw: qemu-img is not installed (apt-get install qemu-utils): %w", name, err)
		}
		return nil, fmt.Errorf("converting %s to raw: qemu-img: %w: %s", name, err, strings.TrimSpace(string(b)))
	}
	raw, err := os.Open(out)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("converting %s to raw: %w", name, err)
	}
	return &tempReader{File: raw, dir: tmp}, nil
}

// tempReader removes its directory on Close.
type tempReader struct {
	*os.File
	dir string
}

func (t *tempReader) Close() error {
	err := t.File.Close()
	return errors.Join(err, os.RemoveAll(t.dir))
}

// storedDigest hashes the seed file name in dir as data (openStored), reading no more than
// the size the manifest declares.
func storedDigest(ctx context.Context, dir, name string, size int64) (int64, digest.Digest, error) {
	f, err := openStored(dir, name, size)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	n, d, err := readerDigest(ctx, io.LimitReader(f, size))
	if err != nil {
		return 0, "", fmt.Errorf("hashing %s: %w", name, err)
	}
	return n, d, nil
}

// FileDigest returns the size and sha256 digest of the file at path.
func FileDigest(ctx context.Context, path string) (int64, digest.Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("hashing: %w", err)
	}
	defer f.Close()
	n, d, err := readerDigest(ctx, f)
	if err != nil {
		return 0, "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return n, d, nil
}

// readerDigest hashes r to its end, stopping early when ctx is cancelled.
func readerDigest(ctx context.Context, r io.Reader) (int64, digest.Digest, error) {
	dg := digest.SHA256.Digester()
	n, err := io.Copy(dg.Hash(), ctxio.Reader(ctx, r))
	if err != nil {
		return n, "", err
	}
	return n, dg.Digest(), nil
}

// DescribeDisk measures the disk file of format f in dir, as the sealer records it: the
// stored size and digest, the raw size and the raw digest.
func DescribeDisk(ctx context.Context, dir, file, format string) (Disk, error) {
	d := Disk{Format: format, File: file}
	if format == FormatRaw {
		d.Compression = CompressionZstd
	}
	var err error
	if d.Size, d.Digest, err = FileDigest(ctx, filepath.Join(dir, file)); err != nil {
		return Disk{}, err
	}
	d.VirtualSize = -1 // measured here
	rc, err := RawReader(ctx, dir, d)
	if err != nil {
		return Disk{}, err
	}
	defer rc.Close()
	if d.VirtualSize, d.RawDigest, err = readerDigest(ctx, rc); err != nil {
		return Disk{}, fmt.Errorf("hashing the raw bytes of %s: %w", file, err)
	}
	return d, nil
}

// DescribeChunked records the chunked disk in dir (its pack and index files, written by
// diskpack.Pack, whose sums say the pack's and the raw disk's digests), as the sealer
// records it. The index is read and checked against the pack's size.
func DescribeChunked(dir, pack, index string, sums *diskpack.Packed) (Disk, error) {
	d := Disk{Format: FormatChunked, File: pack, Compression: CompressionZstd, Index: &DiskIndex{File: index},
		Size: sums.PackSize, Digest: sums.PackDigest, VirtualSize: sums.Size, RawDigest: sums.RawDigest}
	b, err := os.ReadFile(filepath.Join(dir, index))
	if err != nil {
		return Disk{}, err
	}
	d.Index.Size, d.Index.Digest = int64(len(b)), digest.FromBytes(b)
	if _, err := CheckIndex(b, d); err != nil {
		return Disk{}, err
	}
	return d, nil
}

// DescribeSBOM records the SBOM file in dir.
func DescribeSBOM(ctx context.Context, dir, file string) (*SBOM, error) {
	n, d, err := FileDigest(ctx, filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	return &SBOM{File: file, Size: n, Digest: d}, nil
}

// DescribeCredentials records the credentials bundle file in dir, encrypted to recipients.
func DescribeCredentials(ctx context.Context, dir, file string, recipients []string) (*Credentials, error) {
	n, d, err := FileDigest(ctx, filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	return &Credentials{File: file, Recipients: recipients, Size: n, Digest: d}, nil
}
