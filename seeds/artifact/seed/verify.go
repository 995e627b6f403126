package seed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/opencontainers/go-digest"
)

// MismatchError says that a file's content does not match the manifest.
type MismatchError struct {
	File string        // name inside the seed directory
	What string        // "digest" or "raw digest"
	Want digest.Digest // what the manifest says
	Got  digest.Digest // what the bytes hash to
	// WantSize and GotSize differ when the length is what is wrong.
	WantSize, GotSize int64
}

// Unwrap makes a mismatch a bad seed: its content is not what its manifest says.
func (e *MismatchError) Unwrap() error { return ErrBadSeed }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: %s mismatch: the manifest says %s (%d bytes), the content is %s (%d bytes)",
		e.File, e.What, e.Want, e.WantSize, e.Got, e.GotSize)
}

// Verify checks the seed directory dir against its manifest: the digest and size of every
// file as stored, and the digest and size of every disk's raw bytes. It reports every
// mismatch (as *MismatchError) at once.
func Verify(ctx context.Context, dir string) error {
	return verify(ctx, dir, true)
}

// VerifyPulled is Verify for a seed whose chunked disk was assembled from chunks each
// checked against its digest as it arrived (ociseed.Pull): the index is checked against
// the manifest, and the pack, which is those checked chunks laid out as the index says, is
// not hashed again, nor assembled to hash its raw bytes, which a write checks as it
// writes. Every other file's digest is still checked.
func VerifyPulled(ctx context.Context, dir string) error {
	return verify(ctx, dir, false)
}

func verify(ctx context.Context, dir string, chunkedRaw bool) error {
	m, err := Check(dir)
	if err != nil {
		return err
	}
	var errs []error
	check := func(file, what string, wantSize int64, want digest.Digest, gotSize int64, got digest.Digest) {
		if got != want || gotSize != wantSize {
			errs = append(errs, &MismatchError{File: file, What: what, Want: want, Got: got, WantSize: wantSize, GotSize: gotSize})
		}
	}
	for _, d := range m.Disks {
		slog.DebugContext(ctx, "verifying seed disk", "file", d.File, "format", d.Format)
		if d.Format == FormatChunked && !chunkedRaw {
			if _, err := ReadIndex(dir, d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		n, dg, err := storedDigest(ctx, dir, d.File, d.Size)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		check(d.File, "digest", d.Size, d.Digest, n, dg)
		if x := d.Index; x != nil {
			if n, dg, err := storedDigest(ctx, dir, x.File, x.Size); err != nil {
				errs = append(errs, err)
			} else {
				check(x.File, "digest", x.Size, x.Digest, n, dg)
			}
		}
		if d.Format == FormatChunked {
			if err := checkChunks(ctx, dir, d); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if n, dg, err = rawDigest(ctx, dir, d); err != nil {
			errs = append(errs, err)
			continue
		}
		check(d.File, "raw digest", d.VirtualSize, d.RawDigest, n, dg)
	}
	if c := m.Credentials; c != nil {
		n, dg, err := storedDigest(ctx, dir, c.File, c.Size)
		if err != nil {
			errs = append(errs, err)
		} else {
			check(c.File, "digest", c.Size, c.Digest, n, dg)
		}
	}
	if x := m.SBOM; x != nil {
		n, dg, err := storedDigest(ctx, dir, x.File, x.Size)
		if err != nil {
			errs = append(errs, err)
		} else {
			check(x.File, "digest", x.Size, x.Digest, n, dg)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func rawDigest(ctx context.Context, dir string, d Disk) (int64, digest.Digest, error) {
	rc, err := RawReader(ctx, dir, d)
	if err != nil {
		return 0, "", err
	}
	defer rc.Close()
	n, dg, err := readerDigest(ctx, rc)
	if err != nil {
		return 0, "", fmt.Errorf("hashing the raw bytes of %s: %w", d.File, err)
	}
	return n, dg, nil
}

// checkChunks checks every distinct chunk of a chunked disk against the index, which the
// manifest binds by digest: together they fix every byte of the raw disk, as a write
// relies on (writeChunked). The ranges no chunk covers are zeros by construction, so
// nothing there is read or hashed: a disk whose index declares terabytes of holes costs
// what its chunks cost, not hours of hashing zeros. Its whole-disk raw digest is not
// recomputed, as a write of it does not.
func checkChunks(ctx context.Context, dir string, d Disk) error {
	r, _, closeAll, err := openChunked(dir, d)
	if err != nil {
		return err
	}
	defer closeAll()
	return r.Check(ctx)
}
