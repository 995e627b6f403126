package precache

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline"
)

// Store is a content-addressed blob store shared by every build of a depot:
//
//	sha256/<hex>    verified blobs, read-only, never modified (hardlinked into layouts)
//	partial/<hex>   interrupted downloads, resumed with HTTP Range by the next fetch
//
// Each partial file is flocked by the process writing it, so concurrent builds fetch a
// blob once: the second waits and then finds the finished blob.
type Store struct {
	dir string
}

// OpenStore opens (creating) a store in dir.
func OpenStore(dir string) (*Store, error) {
	for _, d := range []string{"sha256", "partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating blob store %s: %w", dir, err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path is where the blob with digest d lives once stored.
func (s *Store) Path(d digest.Digest) string {
	return filepath.Join(s.dir, d.Algorithm().String(), d.Encoded())
}

// Has reports whether the blob is stored with the expected size (size < 0: any).
func (s *Store) Has(d digest.Digest, size int64) bool {
	fi, err := os.Stat(s.Path(d))
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

// Put stores small content (manifests) after checking it against d.
func (s *Store) Put(d digest.Digest, data []byte) error {
	if got := d.Algorithm().FromBytes(data); got != d {
		return &digestError{want: d, got: got}
	}
	if s.Has(d, int64(len(data))) {
		return nil
	}
	// Read-only from the start, like every stored blob. A crash leaves the temporary file
	// beside the blobs, where Prune removes it (only the store links it).
	if err := pipeline.WriteFileAtomic(s.Path(d), data, 0o444); err != nil {
		return fmt.Errorf("storing %s: %w", d, err)
	}
	return nil
}

// Read returns a stored blob's content (for manifests).
func (s *Store) Read(d digest.Digest) ([]byte, error) {
	return os.ReadFile(s.Path(d))
}

// partial is an exclusively locked, resumable download of one blob.
type partial struct {
	store *Store
	d     digest.Digest
	f     *os.File
	h     hash.Hash
	size  int64
}

// acquire locks the partial file of d, waiting for another writer if there is one. done is
// true when the blob turns out to be stored already (maybe by that other writer).
func (s *Store) acquire(ctx context.Context, d digest.Digest) (p *partial, done bool, err error) {
	if d.Algorithm() != digest.SHA256 {
		return nil, false, fmt.Errorf("blob %s: only sha256 digests are supported", d)
	}
	path := filepath.Join(s.dir, "partial", d.Encoded())
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("opening partial blob %s: %w", d, err)
	}
	if err := pipeline.LockFile(ctx, f); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("partial blob %s: %w", d, err)
	}
	if _, err := os.Stat(s.Path(d)); err == nil {
		// Finished by another writer; our (new, empty) partial file is litter.
		if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
			os.Remove(path)
		}
		f.Close()
		return nil, true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		f.Close()
		return nil, false, err
	}
	p = &partial{store: s, d: d, f: f, h: sha256.New()}
	// Re-hash what an interrupted run left, so the digest covers the whole blob.
	n, err := io.Copy(p.h, f)
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("reading partial blob %s: %w", d, err)
	}
	p.size = n
	return p, false, nil
}

func (p *partial) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.h.Write(b[:n])
	p.size += int64(n)
	return n, err
}

// reset discards the partial content.
func (p *partial) reset() error {
	if err := p.f.Truncate(0); err != nil {
		return err
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	p.h.Reset()
	p.size = 0
	return nil
}

// commit checks the digest and moves the blob into the store.
func (p *partial) commit() error {
	if got := digest.NewDigest(digest.SHA256, p.h); got != p.d {
		p.reset()
		return &digestError{want: p.d, got: got}
	}
	if err := p.f.Chmod(0o444); err != nil {
		return err
	}
	if err := os.Rename(p.f.Name(), p.store.Path(p.d)); err != nil {
		return fmt.Errorf("storing blob %s: %w", p.d, err)
	}
	return nil
}

// release unlocks and closes the partial file (kept on disk for a later resume).
func (p *partial) release() {
	p.f.Close()
}

// PruneStats says what Prune removed.
type PruneStats struct {
	Blobs    int   `json:"blobs"`
	Bytes    int64 `json:"bytes"`
	Partials int   `json:"partials"`
}

// Prune removes stored blobs that no layout links any more (link count 1: only the store
// holds them, because the cache entries that used them were evicted) and partial downloads
// untouched for longer than partialAge. Blobs a layout still links are kept, so no cached
// build loses a blob. Run it while no build uses the store: a running build that found a blob
// stored, before linking it into its layout, would fail to link a blob pruned meanwhile.
func (s *Store) Prune(ctx context.Context, partialAge time.Duration) (PruneStats, error) {
	var st PruneStats
	ents, err := os.ReadDir(filepath.Join(s.dir, "sha256"))
	if err != nil {
		return st, fmt.Errorf("reading blob store: %w", err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		p := filepath.Join(s.dir, "sha256", e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || sys.Nlink != 1 {
			continue
		}
		if err := os.Remove(p); err != nil {
			return st, fmt.Errorf("pruning %s: %w", p, err)
		}
		st.Blobs++
		st.Bytes += fi.Size()
	}
	parts, err := os.ReadDir(filepath.Join(s.dir, "partial"))
	if err != nil {
		return st, fmt.Errorf("reading blob store: %w", err)
	}
	for _, e := range parts {
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < partialAge {
			continue
		}
		p := filepath.Join(s.dir, "partial", e.Name())
		// A writer holds the lock while it works; never pull a partial file from under it.
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if os.Remove(p) == nil {
				st.Partials++
			}
		}
		f.Close()
	}
	return st, nil
}
