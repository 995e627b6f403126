package seed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline"
)

// RawReader streams the raw bytes of disk d of the seed directory dir: a zstd raw disk is
// decompressed on the fly; a qcow2 disk is converted by qemu-img into a sparse temporary
// file (qemu-img writes at offsets, so it cannot write to a pipe), which Close removes.
// The temporary file goes under $TMPDIR.
func RawReader(ctx context.Context, dir string, d Disk) (io.ReadCloser, error) {
	p := filepath.Join(dir, d.File)
	switch d.Format {
	case FormatRaw:
		if d.Compression != CompressionZstd {
			return nil, fmt.Errorf("%s: raw disk with compression %q is not supported", d.File, d.Compression)
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("opening disk: %w", err)
		}
		dec, err := zstd.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		return &zstdReader{dec: dec, f: f, name: d.File}, nil
	case FormatQCOW2:
		return qcow2Raw(ctx, p)
	}
	return nil, fmt.Errorf("%s: disk format %q is not supported", d.File, d.Format)
}

type zstdReader struct {
	dec  *zstd.Decoder
	f    *os.File
	name string
}

func (z *zstdReader) Read(p []byte) (int, error) {
	n, err := z.dec.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("decompressing %s: %w", z.name, err)
	}
	return n, err
}

func (z *zstdReader) Close() error {
	z.dec.Close()
	return z.f.Close()
}

func qcow2Raw(ctx context.Context, p string) (io.ReadCloser, error) {
	tmp, err := os.MkdirTemp("", "snofactory-seed-raw-")
	if err != nil {
		return nil, fmt.Errorf("converting %s to raw: %w", p, err)
	}
	out := filepath.Join(tmp, "disk.raw")
	cmd := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", FormatQCOW2, "-O", FormatRaw, p, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("converting %s to raw: qemu-img is not installed (apt-get install qemu-utils): %w", p, err)
		}
		return nil, fmt.Errorf("converting %s to raw: qemu-img: %w: %s", p, err, strings.TrimSpace(string(b)))
	}
	f, err := os.Open(out)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("converting %s to raw: %w", p, err)
	}
	return &tempReader{File: f, dir: tmp}, nil
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
	n, err := io.Copy(dg.Hash(), pipeline.ContextReader(ctx, r))
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

// DescribeCredentials records the credentials bundle file in dir, encrypted to recipients.
func DescribeCredentials(ctx context.Context, dir, file string, recipients []string) (*Credentials, error) {
	n, d, err := FileDigest(ctx, filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	return &Credentials{File: file, Recipients: recipients, Size: n, Digest: d}, nil
}
