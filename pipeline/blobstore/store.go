package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
)

// SharedName is the name of the depot-wide store among the pipeline's shared directories
// (pipeline.Env.Shared): every stage that downloads content opens the store there.
const SharedName = "blobs"

const (
	blobDir    = "sha256"
	partialDir = "partial"
)

// Store is a content-addressed blob store in a directory; see the package documentation.
// A Store value holds no state beyond its directory, so any number of values and processes
// may use one directory at once.
type Store struct {
	dir string
}

// Open opens the store in dir, creating its folders if needed.
func Open(dir string) (*Store, error) {
	for _, d := range []string{blobDir, partialDir} {
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
	return filepath.Join(s.dir, blobDir, d.Encoded())
}

func (s *Store) partialPath(d digest.Digest) string {
	return filepath.Join(s.dir, partialDir, d.Encoded())
}

// Has reports whether the blob is stored with the expected size (size < 0: any).
func (s *Store) Has(d digest.Digest, size int64) bool {
	if checkDigest(d) != nil {
		return false
	}
	fi, err := os.Stat(s.Path(d))
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

// Put stores small content (manifests) after checking it against d. It goes through the
// blob's partial file like any download, so it is staged, locked and renamed into place.
func (s *Store) Put(d digest.Digest, data []byte) error {
	if err := checkDigest(d); err != nil {
		return err
	}
	if got := d.Algorithm().FromBytes(data); got != d {
		return &DigestError{Want: d, Got: got}
	}
	if s.Has(d, int64(len(data))) {
		return nil
	}
	// Waiting is bounded: another holder of the lock is storing these same bytes.
	w, stored, err := s.Acquire(context.Background(), d)
	if err != nil || stored {
		return err
	}
	defer w.Release()
	if err := w.Reset(); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("storing %s: %w", d, err)
	}
	return w.Commit()
}

// Read returns a stored blob's content (for manifests).
func (s *Store) Read(d digest.Digest) ([]byte, error) {
	if err := checkDigest(d); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.Path(d))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", d, err)
	}
	return b, nil
}

// DigestError is content that does not match its digest; it never enters the store.
type DigestError struct {
	Want, Got digest.Digest
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("content has digest %s, want %s", e.Got, e.Want)
}

// ErrUnsupported is returned for digests the store cannot hold.
var ErrUnsupported = errors.New("only well-formed sha256 digests are supported")

// checkDigest rejects what is not a well-formed sha256 digest; the encoded part becomes a
// file name, so this also keeps paths inside the store.
func checkDigest(d digest.Digest) error {
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
		return fmt.Errorf("blob %q: %w", d, ErrUnsupported)
	}
	return nil
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
