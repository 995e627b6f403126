package precache

import (
	"github.com/snofactory/snofactory/pipeline/blobstore"
)

// Store is the depot's content store (pipeline/blobstore), shared with the live ISO
// downloads: verified read-only blobs that layouts hardlink, and flocked partial files that
// the next fetch resumes with HTTP Range.
type Store = blobstore.Store

// OpenStore opens (creating) a store in dir.
func OpenStore(dir string) (*Store, error) {
	return blobstore.Open(dir)
}

// digestError is content that does not match its digest; the partial data is discarded.
type digestError = blobstore.DigestError
