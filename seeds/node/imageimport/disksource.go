package imageimport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/types"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
)

// The images are copied straight off the data disk: a containers/image source over
// precachedisk.Disk hands the copy one blob at a time from its offset on the device, so no
// unpacked layout needs scratch space. (containers/image's oci-archive transport unpacks the
// whole archive to a temporary directory first, and docker-archive reads another format.)

// diskTransport names the source in errors and signature policy look-ups.
type diskTransport struct{}

func (diskTransport) Name() string { return "snofactory-precache-disk" }

func (diskTransport) ParseReference(string) (types.ImageReference, error) {
	return nil, errors.New("precache disk references are made by the import, not parsed")
}

func (diskTransport) ValidatePolicyConfigurationScope(string) error { return nil }

// diskRef is one image of an opened disk.
type diskRef struct {
	disk  *precachedisk.Disk
	image precachedisk.Image
	// onBlobDone, if set, is called with the image's name when the copy has read a blob
	// through.
	onBlobDone func(ref string)
}

func (r diskRef) Transport() types.ImageTransport         { return diskTransport{} }
func (r diskRef) StringWithinTransport() string           { return r.image.Ref }
func (r diskRef) DockerReference() reference.Named        { return nil }
func (r diskRef) PolicyConfigurationIdentity() string     { return "" }
func (r diskRef) PolicyConfigurationNamespaces() []string { return nil }

func (r diskRef) NewImage(ctx context.Context, sys *types.SystemContext) (types.ImageCloser, error) {
	src, err := r.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	return image.FromSource(ctx, sys, src)
}

func (r diskRef) NewImageSource(context.Context, *types.SystemContext) (types.ImageSource, error) {
	return diskSource{ref: r}, nil
}

func (r diskRef) NewImageDestination(context.Context, *types.SystemContext) (types.ImageDestination, error) {
	return nil, errors.New("the precache disk is read-only")
}

func (r diskRef) DeleteImage(context.Context, *types.SystemContext) error {
	return errors.New("the precache disk is read-only")
}

// diskSource serves one image's manifests and blobs off the disk, each checked against its
// digest as it is read.
type diskSource struct{ ref diskRef }

func (s diskSource) Reference() types.ImageReference { return s.ref }
func (s diskSource) Close() error                    { return nil }
func (s diskSource) HasThreadSafeGetBlob() bool      { return true }

// GetManifest returns the index entry's manifest (or list), or the instance a list names.
func (s diskSource) GetManifest(_ context.Context, instance *digest.Digest) ([]byte, string, error) {
	dg, mt := s.ref.image.Digest, s.ref.image.MediaType
	if instance != nil {
		dg, mt = *instance, ""
	}
	b, err := s.ref.disk.ReadBlob(dg)
	if err != nil {
		return nil, "", fmt.Errorf("precache image %s: manifest %s: %w", s.ref.image.Ref, dg, err)
	}
	if mt == "" {
		mt = manifest.GuessMIMEType(b)
	}
	return b, mt, nil
}

func (s diskSource) GetBlob(_ context.Context, info types.BlobInfo, _ types.BlobInfoCache) (io.ReadCloser, int64, error) {
	rc, size, err := s.ref.disk.Blob(info.Digest)
	if err != nil {
		return nil, 0, fmt.Errorf("precache image %s: %w", s.ref.image.Ref, err)
	}
	if s.ref.onBlobDone != nil {
		rc = notifyCloser{ReadCloser: rc, done: func() { s.ref.onBlobDone(s.ref.image.Ref) }}
	}
	return rc, size, nil
}

func (s diskSource) GetSignatures(context.Context, *digest.Digest) ([][]byte, error) {
	return nil, nil
}

func (s diskSource) LayerInfosForCopy(context.Context, *digest.Digest) ([]types.BlobInfo, error) {
	return nil, nil
}

// notifyCloser calls done when the copy closes the blob, by then written to its destination.
type notifyCloser struct {
	io.ReadCloser
	done func()
}

func (n notifyCloser) Close() error {
	err := n.ReadCloser.Close()
	n.done()
	return err
}
