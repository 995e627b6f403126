package seed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// headLen is how much of the start of a disk is written last, as coreos-installer does:
// the partition tables and boot code live there, so a target is bootable (complete) only
// once everything else was written and verified.
const headLen = 1 << 20

// PartialError says a write stopped after the target's content was changed.
type PartialError struct {
	Device string
	Err    error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%s now holds partial data (its first MiB is cleared, so it will not boot as it is): write the seed again: %v", e.Device, e.Err)
}

func (e *PartialError) Unwrap() error { return e.Err }

// TargetError refuses a target before anything is written to it.
type TargetError struct {
	Device, Problem string
}

func (e *TargetError) Error() string { return e.Device + ": " + e.Problem }

// WriteDevice writes the raw disk of the seed in dir onto device, a block device or a
// regular file (created if missing), checking what it writes as a depot writer or an edge
// installer does. It prefers the chunked form (each chunk checked against its digest,
// written at its offset on every core), else the raw (zstd) form, streamed and hashed
// against the manifest's raw digest; neither needs a temporary file.
//
// Everything cheap is checked before the target is touched: the seed directory holds only
// regular files, the manifest, the stored file's size and digest, the disk's format; the
// target is not mounted (*output.MountedError), not a seed file, not a character device,
// a directory or a read-only file (*output.Error), and a block device is large enough
// (*TargetError). A block
// device is written in place, its first MiB last; a failure after the first write clears
// that MiB and says so (*PartialError). A file target is written beside itself and renamed
// into place only once verified, so a failure leaves it as it was. On a file, runs of
// zeros become holes.
func WriteDevice(ctx context.Context, dir, device string) (Disk, error) {
	m, err := Check(dir)
	if err != nil {
		return Disk{}, err
	}
	d := streamable(m.Disks)
	block, err := checkTarget(dir, m, device, d.VirtualSize)
	if err != nil {
		return d, err
	}
	if d.Format == FormatChunked {
		return d, writeChunked(ctx, dir, device, d, block)
	}
	n, dg, err := storedDigest(ctx, dir, d.File, d.Size)
	if err != nil {
		return d, err
	}
	if dg != d.Digest || n != d.Size {
		return d, &MismatchError{File: d.File, What: "digest", Want: d.Digest, Got: dg, WantSize: d.Size, GotSize: n}
	}
	rc, err := RawReader(ctx, dir, d)
	if err != nil {
		return d, err
	}
	defer rc.Close()
	slog.InfoContext(ctx, "writing seed disk", "file", d.File, "device", device, "bytes", d.VirtualSize)
	if block {
		return d, writeBlock(ctx, device, d, rc)
	}
	return d, writeFile(ctx, device, d, rc)
}

// streamable picks the disk that streams without a temporary file: chunked, else raw,
// else the first.
func streamable(disks []Disk) Disk {
	for _, f := range []string{FormatChunked, FormatRaw} {
		for _, d := range disks {
			if d.Format == f {
				return d
			}
		}
	}
	return disks[0]
}

// checkTarget refuses a target that must not be written, before anything is: the output
// rules (output.Check, with the seed's own files as inputs), and a block device too small
// for the disk. It reports whether the target is a block device.
func checkTarget(dir string, m *Manifest, device string, size int64) (bool, error) {
	var inputs []string
	for _, name := range m.files() {
		inputs = append(inputs, filepath.Join(dir, name))
	}
	block, err := output.Check(device, inputs...)
	if err != nil || !block {
		return block, err
	}
	f, err := os.OpenFile(device, os.O_RDONLY, 0)
	if err != nil {
		return true, fmt.Errorf("opening the target device: %w", err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return true, fmt.Errorf("sizing the target device: %w", err)
	}
	if end < size {
		return true, &TargetError{Device: device, Problem: fmt.Sprintf("holds %d bytes, the seed's disk needs %d", end, size)}
	}
	return true, nil
}

// writeBlock writes the raw disk onto a block device in place (never truncated, never
// renamed over), its first MiB last.
func writeBlock(ctx context.Context, device string, d Disk, rc io.Reader) error {
	f, err := os.OpenFile(device, os.O_WRONLY|os.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("opening the target device: %w", err)
	}
	defer f.Close()
	dg := digest.SHA256.Digester()
	head := make([]byte, headLen)
	k, err := io.ReadFull(io.TeeReader(rc, dg.Hash()), head)
	if err != nil && err != io.ErrUnexpectedEOF {
		return fmt.Errorf("reading %s: %w", d.File, err)
	}
	head = head[:k]
	written := false
	fail := func(err error) error {
		if !written {
			return fmt.Errorf("writing %s onto %s: %w", d.File, device, err)
		}
		if _, werr := f.WriteAt(make([]byte, headLen), 0); werr == nil {
			f.Sync()
		}
		return &PartialError{Device: device, Err: err}
	}
	if _, err := f.Seek(int64(k), io.SeekStart); err != nil {
		return fail(err)
	}
	written = true
	n, _, err := copyHashed(ctx, f, io.TeeReader(rc, dg.Hash()), false)
	if err != nil {
		return fail(err)
	}
	n += int64(k)
	if got := dg.Digest(); got != d.RawDigest || n != d.VirtualSize {
		return fail(&MismatchError{File: d.File, What: "raw digest", Want: d.RawDigest, Got: got, WantSize: d.VirtualSize, GotSize: n})
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	// Complete: the head goes on only now.
	if _, err := f.WriteAt(head, 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	return f.Close()
}

// writeFile writes the raw disk into a file through output.Write: beside device, renamed
// into place once its digest is verified; on any failure the partial file is removed.
func writeFile(ctx context.Context, device string, d Disk, rc io.Reader) error {
	// 0600: the disk keeps the cluster's private keys.
	return output.Write(device, 0o600, func(f *os.File) error {
		n, got, err := copyHashed(ctx, f, rc, true)
		if err != nil {
			return fmt.Errorf("writing %s onto %s: %w", d.File, device, err)
		}
		if got != d.RawDigest || n != d.VirtualSize {
			return &MismatchError{File: d.File, What: "raw digest", Want: d.RawDigest, Got: got, WantSize: d.VirtualSize, GotSize: n}
		}
		if err := f.Truncate(n); err != nil {
			return fmt.Errorf("writing %s: %w", device, err)
		}
		return nil
	})
}

// writeChunked writes a chunked disk chunk by chunk at its offsets (diskpack.WriteAt:
// chunks read, checked, decompressed and written on every core at once). The
// index is checked against the manifest and every chunk against its digest as it is
// decoded: together they fix each byte of the raw disk, so the whole-disk digest is not
// recomputed (on a 16 GiB disk that hash alone takes longer than the write). A file target
// starts as a hole of the disk's size, so zero ranges cost nothing.
func writeChunked(ctx context.Context, dir, device string, d Disk, block bool) error {
	r, x, closeAll, err := openChunked(dir, d)
	if err != nil {
		return err
	}
	defer closeAll()
	slog.InfoContext(ctx, "writing seed disk", "file", d.File, "device", device, "bytes", d.VirtualSize, "chunks", len(x.Chunks))
	if block {
		return writeChunkedBlock(ctx, device, d, x, r)
	}
	return writeChunkedFile(ctx, device, d, x, r)
}

// writeChunkedFile writes a chunked disk into a file through output.Write: beside device,
// renamed into place once every chunk was written and checked, and synced.
func writeChunkedFile(ctx context.Context, device string, d Disk, x *diskpack.Index, r *diskpack.Reader) error {
	return output.Write(device, 0o600, func(out *os.File) error {
		if err := out.Truncate(d.VirtualSize); err != nil {
			return fmt.Errorf("sizing %s: %w", device, err)
		}
		if err := writeAt(ctx, x, r, out, out); err != nil {
			return fmt.Errorf("writing %s onto %s: %w", d.File, device, badChunk(err))
		}
		return nil
	})
}

// writeAt writes the disk of r (index x) through w onto f (w is f, or passes f's writes
// on): with O_DIRECT where f and the disk allow it (diskpack.Reader.WriteAtDirect), which
// saves the kernel's copy of every byte into the page cache, else buffered. f is left
// buffered.
func writeAt(ctx context.Context, x *diskpack.Index, r *diskpack.Reader, w io.WriterAt, f *os.File) error {
	if x.DirectWritable() {
		if direct, err := output.Direct(f, func() error { return r.WriteAtDirect(ctx, w) }); direct {
			return err
		}
	}
	return r.WriteAt(ctx, w)
}

// badChunk makes a chunk that does not match its digest a bad seed (ErrBadSeed), still a
// *diskpack.ChunkError.
func badChunk(err error) error {
	var ce *diskpack.ChunkError
	if errors.As(err, &ce) {
		return badChunkError{err}
	}
	return err
}

type badChunkError struct{ error }

func (e badChunkError) Unwrap() []error { return []error{e.error, ErrBadSeed} }

// writeChunkedBlock writes a chunked disk onto a block device in place: the ranges no
// chunk covers are zeroed, the chunks written, and the first MiB (held back in memory)
// goes on last, as writeBlock does.
func writeChunkedBlock(ctx context.Context, device string, d Disk, x *diskpack.Index, r *diskpack.Reader) error {
	f, err := os.OpenFile(device, os.O_WRONLY|os.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("opening the target device: %w", err)
	}
	defer f.Close()
	fail := func(err error) error {
		if _, werr := f.WriteAt(make([]byte, headLen), 0); werr == nil {
			f.Sync()
		}
		return &PartialError{Device: device, Err: err}
	}
	head := &heldHead{w: f, head: make([]byte, min(headLen, d.VirtualSize))}
	for _, g := range x.Gaps() {
		if g[1] <= headLen {
			continue // the held head starts as zeros
		}
		if err := zeroRange(ctx, f, max(g[0], headLen), g[1]); err != nil {
			return fail(fmt.Errorf("zeroing %s at %d: %w", device, g[0], err))
		}
	}
	// The head is held in memory and the gaps are zeroed: from here on every write can
	// be direct.
	if err := writeAt(ctx, x, r, head, f); err != nil {
		return fail(fmt.Errorf("writing %s onto %s: %w", d.File, device, badChunk(err)))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if _, err := f.WriteAt(head.head, 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	return f.Close()
}

// heldHead passes writes on to w, except those to the first len(head) bytes, which it
// keeps in head.
type heldHead struct {
	w    io.WriterAt
	head []byte
}

func (h *heldHead) WriteAt(p []byte, off int64) (int, error) {
	n := len(p)
	if off < int64(len(h.head)) {
		k := copy(h.head[off:], p)
		p, off = p[k:], off+int64(k)
	}
	if len(p) > 0 {
		if _, err := h.w.WriteAt(p, off); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// zeroRange zeroes [from, to) of f: through the kernel where the device can zero a range
// itself (fallocate FALLOC_FL_ZERO_RANGE), else by writing zeros.
func zeroRange(ctx context.Context, f *os.File, from, to int64) error {
	if unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, from, to-from) == nil {
		return nil
	}
	zeros := make([]byte, min(1<<20, to-from))
	for at := from; at < to; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-at)], at)
		if err != nil {
			return err
		}
		at += int64(k)
	}
	return nil
}

// IncompleteError says a target holds an interrupted write: its first MiB, written last,
// is cleared.
type IncompleteError struct{ Device string }

func (e *IncompleteError) Error() string {
	return e.Device + " holds an incomplete seed: its first MiB is cleared, as an interrupted seed write leaves it; write the seed again"
}

// VerifyDevice checks that device (a disk or a file that seed write wrote) holds the seed
// in dir: complete (its first MiB, written last, is there) and byte for byte the raw disk
// the manifest describes. Only the disk's length is read; what lies beyond is not the seed's.
func VerifyDevice(ctx context.Context, dir, device string) (Disk, error) {
	m, err := Check(dir)
	if err != nil {
		return Disk{}, err
	}
	d := m.Disks[0]
	// A disk or the file seed write wrote, opened without blocking: a FIFO (which would wait
	// for a writer, deaf to Ctrl-C) or a character device such as /dev/zero is the user's
	// mistake, refused before anything is read.
	f, err := smallfile.OpenOrBlockDevice(device)
	if errors.Is(err, smallfile.ErrNotRegular) {
		return d, badinput.Errorf("--device %s: want a block device or a regular file: %w", device, err)
	}
	if err != nil {
		return d, fmt.Errorf("reading the target: %w", err)
	}
	defer f.Close()
	head := make([]byte, min(int64(headLen), d.VirtualSize))
	if _, err := io.ReadFull(ctxio.Reader(ctx, f), head); err != nil {
		return d, fmt.Errorf("%s holds less than the seed's disk: %w", device, err)
	}
	if bytes.Equal(head, make([]byte, len(head))) {
		return d, &IncompleteError{Device: device}
	}
	dg := digest.SHA256.Digester()
	dg.Hash().Write(head)
	n, err := io.Copy(dg.Hash(), ctxio.Reader(ctx, io.LimitReader(f, d.VirtualSize-int64(len(head)))))
	if err != nil {
		return d, fmt.Errorf("reading %s: %w", device, err)
	}
	n += int64(len(head))
	if got := dg.Digest(); got != d.RawDigest || n != d.VirtualSize {
		return d, &MismatchError{File: device, What: "raw digest", Want: d.RawDigest, Got: got, WantSize: d.VirtualSize, GotSize: n}
	}
	return d, nil
}

// copyHashed copies r to w and returns the bytes and digest of what it read. With sparse,
// all-zero blocks are skipped with a seek instead of written.
func copyHashed(ctx context.Context, w *os.File, r io.Reader, sparse bool) (int64, digest.Digest, error) {
	const block = 1 << 20
	buf := make([]byte, block)
	zero := make([]byte, block)
	dg := digest.SHA256.Digester()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, "", err
		}
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			dg.Hash().Write(buf[:k])
			if sparse && bytes.Equal(buf[:k], zero[:k]) {
				_, werr := w.Seek(int64(k), io.SeekCurrent)
				if werr != nil {
					return n, "", werr
				}
			} else if _, werr := w.Write(buf[:k]); werr != nil {
				return n, "", werr
			}
			n += int64(k)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, dg.Digest(), nil
		}
		if err != nil {
			return n, "", err
		}
	}
}
