package ociseed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// target is where Push stores blobs and manifests: a registry, a layout or an archive.
type target interface {
	// putBlob stores b unless the target has it already, and returns the bytes it sent.
	putBlob(ctx context.Context, b blob) (int64, error)
	// putManifest stores a manifest, under the location's tag when tagged, else by digest.
	putManifest(ctx context.Context, raw []byte, tagged bool) error
	// hasManifest tells whether the target holds the manifest d names already.
	hasManifest(ctx context.Context, d digest.Digest) (bool, error)
	// checksDigests tells whether the target refuses a blob whose bytes are not its
	// digest, as a registry must, so the pusher need not hash them too.
	checksDigests() bool
	// commit finishes the push (an archive is only complete then); abort drops it.
	commit() error
	abort()
}

// source is where Pull, Inspect and AttachReferrer read from.
type source interface {
	// resolve returns the descriptor and bytes of the manifest the location names.
	resolve(ctx context.Context) (ocispec.Descriptor, []byte, error)
	fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error)
	// checksDigests tells whether fetch fails a blob whose bytes are not its digest
	// (go-containerregistry checks what it reads from a registry), so the puller need
	// not hash them too.
	checksDigests() bool
	// manifest reads the manifest d names, checked against its digest.
	manifest(ctx context.Context, d ocispec.Descriptor) ([]byte, error)
	// referrers lists the manifests whose subject is subject.
	referrers(ctx context.Context, subject ocispec.Descriptor) ([]ocispec.Descriptor, error)
	close() error
}

func openTarget(ctx context.Context, loc Location, o options) (target, error) {
	switch loc.Transport {
	case TransportRegistry:
		return newRegistry(loc, o)
	case TransportLayout:
		return &layoutStore{dir: loc.Path, tag: loc.Tag}, nil
	}
	// An oci-archive is written whole through pipeline/output (Push), never opened as a target.
	return nil, fmt.Errorf("cannot write to transport %q here", loc.Transport)
}

// openRef parses ref and opens it for reading.
func openRef(ctx context.Context, ref string, o options) (source, Location, error) {
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return nil, loc, err
	}
	src, err := openSource(ctx, loc, o)
	return src, loc, err
}

func openSource(ctx context.Context, loc Location, o options) (source, error) {
	switch loc.Transport {
	case TransportRegistry:
		return newRegistry(loc, o)
	case TransportLayout:
		return &layoutStore{dir: loc.Path, tag: loc.Tag}, nil
	case TransportOCIArchive:
		return openArchive(loc)
	}
	return nil, fmt.Errorf("unknown transport %q", loc.Transport)
}

// readBlob reads a small blob (a manifest, a config) whole and checks its digest.
func readBlob(ctx context.Context, src source, d ocispec.Descriptor, limit int64) ([]byte, error) {
	if d.Size > limit {
		return nil, fmt.Errorf("blob %s is %d bytes, more than the %d expected", d.Digest, d.Size, limit)
	}
	var b []byte
	// A body that breaks on the way is fetched again, as every request is (netlimit).
	err := netlimit.DefaultPolicy().Do(ctx, func() error {
		rc, err := src.fetch(ctx, d)
		if err != nil {
			return err
		}
		defer rc.Close()
		// The descriptor's size is the cap: one byte more shows a body longer than declared.
		if b, err = io.ReadAll(io.LimitReader(rc, d.Size+1)); err != nil {
			return fmt.Errorf("reading blob %s: %w", d.Digest, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if got := digest.FromBytes(b); got != d.Digest || int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: content has digest %s (%d bytes, want %d)", d.Digest, got, len(b), d.Size)
	}
	return b, nil
}

// maxMetadata bounds manifests and configs read into memory.
const maxMetadata = 4 << 20

// putManifestBlob stores an artifact manifest through put and returns its descriptor for an
// index, carrying the manifest's artifactType.
func putManifestBlob(ctx context.Context, put func(context.Context, blob) (int64, error), raw []byte) (ocispec.Descriptor, error) {
	b := bytesBlob(manifestDescriptor(raw).MediaType, raw, "manifest")
	if _, err := put(ctx, b); err != nil {
		return ocispec.Descriptor{}, err
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("decoding the manifest: %w", err)
	}
	desc := b.desc
	desc.ArtifactType = man.ArtifactType
	return desc, nil
}
