package blobstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline"
)

// Writer is an exclusively locked, resumable download of one blob: its partial file. Write
// appends at Offset; Commit verifies the digest and renames the blob into place; Release
// unlocks, keeping what was written for the next writer to resume.
type Writer struct {
	s   *Store
	d   digest.Digest
	f   *os.File
	h   hash.Hash
	off int64
	// committed: the file is the stored blob now, no longer a partial.
	committed bool
}

// Acquire locks the partial file of d, waiting for another writer if there is one. stored is
// true (and w nil) when the blob is in the store already, maybe put there by that other
// writer. Otherwise the caller owns w until Release, and w.Offset says how many bytes an
// interrupted writer left (to resume with an HTTP Range request).
func (s *Store) Acquire(ctx context.Context, d digest.Digest) (w *Writer, stored bool, err error) {
	if err := checkDigest(d); err != nil {
		return nil, false, err
	}
	for {
		if s.Has(d, -1) {
			return nil, true, nil
		}
		f, err := s.lockPartial(ctx, d)
		if err != nil {
			return nil, false, err
		}
		if f == nil {
			// The file we locked was renamed into the store or pruned: look again.
			continue
		}
		if s.Has(d, -1) {
			f.Close()
			return nil, true, nil
		}
		w = &Writer{s: s, d: d, f: f, h: sha256.New()}
		// Re-hash what an interrupted writer left, so the digest covers the whole blob.
		n, err := io.Copy(w.h, f)
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("reading partial blob %s: %w", d, err)
		}
		w.off = n
		return w, false, nil
	}
}

// lockPartial opens and flocks partial/<hex>. It returns nil (and no error) when the locked
// file is no longer the one at that path: its previous holder committed it or removed it
// while this one waited.
func (s *Store) lockPartial(ctx context.Context, d digest.Digest) (*os.File, error) {
	path := s.partialPath(d)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening partial blob %s: %w", d, err)
	}
	if err := pipeline.LockFile(ctx, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("partial blob %s: %w", d, err)
	}
	held, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("partial blob %s: %w", d, err)
	}
	now, err := os.Stat(path)
	if err != nil && !notExist(err) {
		f.Close()
		return nil, fmt.Errorf("partial blob %s: %w", d, err)
	}
	if err != nil || !os.SameFile(held, now) {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// Digest is the digest of the blob being written.
func (w *Writer) Digest() digest.Digest { return w.d }

// Offset is how many bytes the partial file holds.
func (w *Writer) Offset() int64 { return w.off }

// Write appends to the partial file.
func (w *Writer) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.h.Write(b[:n])
	w.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("writing partial blob %s: %w", w.d, err)
	}
	return n, nil
}

// Reset discards the partial content, to start over (a server that ignored a Range request).
func (w *Writer) Reset() error {
	if err := w.f.Truncate(0); err != nil {
		return fmt.Errorf("resetting partial blob %s: %w", w.d, err)
	}
	if _, err := w.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("resetting partial blob %s: %w", w.d, err)
	}
	w.h.Reset()
	w.off = 0
	return nil
}

// Commit checks the content against the digest and renames it into the store, read-only.
// Content that does not match is discarded (a *DigestError), so a retry starts over.
func (w *Writer) Commit() error {
	if got := digest.NewDigest(digest.SHA256, w.h); got != w.d {
		if err := w.Reset(); err != nil {
			return err
		}
		return &DigestError{Want: w.d, Got: got}
	}
	if err := w.f.Chmod(0o444); err != nil {
		return fmt.Errorf("storing blob %s: %w", w.d, err)
	}
	// A stored blob must survive a power loss complete, not only be named.
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("storing blob %s: %w", w.d, err)
	}
	if err := os.Rename(w.f.Name(), w.s.Path(w.d)); err != nil {
		return fmt.Errorf("storing blob %s: %w", w.d, err)
	}
	w.committed = true
	return nil
}

// Release unlocks the partial file. What it holds is kept for a later resume; an empty one
// is removed, as it has nothing to resume.
func (w *Writer) Release() error {
	if w.off == 0 && !w.committed {
		// Still locked, so no other writer is using it; waiters notice it is gone.
		if err := os.Remove(w.f.Name()); err != nil && !notExist(err) {
			w.f.Close()
			return fmt.Errorf("removing empty partial blob %s: %w", w.d, err)
		}
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("closing partial blob %s: %w", w.d, err)
	}
	return nil
}
