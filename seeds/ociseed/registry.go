package ociseed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/seed"
)

// registry is a target and a source on an OCI registry, through go-containerregistry.
type registry struct {
	ref    name.Reference
	pusher *remote.Pusher
	puller *remote.Puller
	opts   []remote.Option
}

func newRegistry(loc Location, o options) (*registry, error) {
	ropts := []remote.Option{
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithTransport(o.transport),
		remote.WithJobs(o.jobs),
		remote.WithUserAgent("snofactory"),
	}
	pusher, err := remote.NewPusher(ropts...)
	if err != nil {
		return nil, fmt.Errorf("registry client for %s: %w", loc.Ref, err)
	}
	puller, err := remote.NewPuller(ropts...)
	if err != nil {
		return nil, fmt.Errorf("registry client for %s: %w", loc.Ref, err)
	}
	return &registry{ref: loc.Ref, pusher: pusher, puller: puller, opts: ropts}, nil
}

// putBlob lets go-containerregistry HEAD the blob first and upload it only when the
// registry lacks it. Whether it uploaded shows in whether it opened the content.
func (r *registry) putBlob(ctx context.Context, b blob) (int64, error) {
	l := &blobLayer{b: b}
	if err := r.pusher.Upload(ctx, r.ref.Context(), l); err != nil {
		var te *transport.Error
		if errors.As(err, &te) && slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool { return d.Code == transport.DigestInvalidErrorCode }) {
			// The registry hashed what we sent (checksDigests): the seed's file is not
			// what its manifest says.
			return l.sent.Load(), fmt.Errorf("%s: %w: the registry found the bytes sent are not its digest %s, so the seed changed since it was sealed; run seed verify (%w)",
				b.what, seed.ErrBadSeed, b.desc.Digest, err)
		}
		return l.sent.Load(), fmt.Errorf("uploading %s (%s) to %s: %w", b.what, b.desc.Digest, r.ref.Context(), err)
	}
	return l.sent.Load(), nil
}

func (r *registry) putManifest(ctx context.Context, raw []byte, tagged bool) error {
	ref := r.ref
	if !tagged {
		ref = r.ref.Context().Digest(digest.FromBytes(raw).String())
	}
	if err := r.pusher.Put(ctx, ref, rawManifest(raw)); err != nil {
		return fmt.Errorf("pushing the manifest to %s: %w", ref, err)
	}
	return nil
}

func (r *registry) hasManifest(ctx context.Context, d digest.Digest) (bool, error) {
	if _, err := r.puller.Head(ctx, r.ref.Context().Digest(d.String())); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

func (r *registry) checksDigests() bool { return true }
func (r *registry) commit() error       { return nil }
func (r *registry) abort()              {}
func (r *registry) close() error        { return nil }

func (r *registry) resolve(ctx context.Context) (ocispec.Descriptor, []byte, error) {
	d, err := r.puller.Get(ctx, r.ref)
	if err != nil {
		return ocispec.Descriptor{}, nil, fmt.Errorf("fetching the manifest of %s: %w", r.ref, err)
	}
	return ocispec.Descriptor{MediaType: string(d.MediaType), Digest: digest.Digest(d.Digest.String()), Size: d.Size}, d.Manifest, nil
}

func (r *registry) fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	l, err := r.puller.Layer(ctx, r.ref.Context().Digest(d.Digest.String()))
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s from %s: %w", d.Digest, r.ref.Context(), err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s from %s: %w", d.Digest, r.ref.Context(), err)
	}
	return rc, nil
}

func (r *registry) manifest(ctx context.Context, d ocispec.Descriptor) ([]byte, error) {
	if d.Size > maxMetadata {
		return nil, fmt.Errorf("manifest %s is %d bytes, more than the %d expected", d.Digest, d.Size, maxMetadata)
	}
	got, err := r.puller.Get(ctx, r.ref.Context().Digest(d.Digest.String()))
	if err != nil {
		return nil, fmt.Errorf("fetching manifest %s from %s: %w", d.Digest, r.ref.Context(), err)
	}
	if digest.FromBytes(got.Manifest) != d.Digest {
		return nil, fmt.Errorf("manifest %s from %s: its content has another digest", d.Digest, r.ref.Context())
	}
	return got.Manifest, nil
}

// rawManifest is a manifest go-containerregistry pushes as is, with the media type it names.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error) { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) {
	if mt := manifestDescriptor(m).MediaType; mt != "" {
		return types.MediaType(mt), nil
	}
	return types.OCIManifestSchema1, nil
}

// blobLayer is a blob as the v1.Layer go-containerregistry uploads; it counts the bytes
// read from it, which are the bytes sent.
type blobLayer struct {
	b    blob
	sent atomic.Int64
}

func (l *blobLayer) Digest() (v1.Hash, error) { return v1.NewHash(l.b.desc.Digest.String()) }
func (l *blobLayer) DiffID() (v1.Hash, error) { return l.Digest() }
func (l *blobLayer) Size() (int64, error)     { return l.b.desc.Size, nil }
func (l *blobLayer) MediaType() (types.MediaType, error) {
	return types.MediaType(l.b.desc.MediaType), nil
}
func (l *blobLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }
func (l *blobLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.b.open()
	if err != nil {
		return nil, err
	}
	return countingReader{rc, &l.sent}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
