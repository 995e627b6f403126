package ociseed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// registry is a target and a source on an OCI registry, through go-containerregistry.
type registry struct {
	ref    name.Reference
	pusher *remote.Pusher
	puller *remote.Puller
	opts   []remote.Option
	o      options
	// up uploads blobs and down downloads them; each made, under mu, on first use.
	mu       sync.Mutex
	up, down *blobClient
}

func newRegistry(loc Location, o options) (*registry, error) {
	ropts := []remote.Option{
		remote.WithAuthFromKeychain(o.keychain),
		remote.WithTransport(o.transport),
		remote.WithJobs(o.jobs),
		remote.WithUserAgent("snofactory"),
		// o.transport retries (netlimit.Transport); go-containerregistry's own retries on
		// top would multiply the tries, and its default leaves blob bodies out.
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
	}
	pusher, err := remote.NewPusher(ropts...)
	if err != nil {
		return nil, fmt.Errorf("registry client for %s: %w", loc.Ref, err)
	}
	puller, err := remote.NewPuller(ropts...)
	if err != nil {
		return nil, fmt.Errorf("registry client for %s: %w", loc.Ref, err)
	}
	return &registry{ref: loc.Ref, pusher: pusher, puller: puller, opts: ropts, o: o}, nil
}

// blobs is the registry's blobClient for pushing (push) or for pulling, made
// (authenticated) on first use.
func (r *registry) blobs(ctx context.Context, push bool) (*blobClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, scope := &r.down, transport.PullScope
	if push {
		c, scope = &r.up, transport.PushScope
	}
	if *c == nil {
		bc, err := newBlobClient(ctx, r.ref.Context(), r.o, scope)
		if err != nil {
			return nil, err
		}
		*c = bc
	}
	return *c, nil
}

// putBlob HEADs the blob first and uploads it only when the registry lacks it, in one
// monolithic upload (blobClient). Whether it uploaded shows in whether it opened the
// content.
func (r *registry) putBlob(ctx context.Context, b blob) (int64, error) {
	up, err := r.blobs(ctx, true)
	if err != nil {
		return 0, fmt.Errorf("uploading to %s: %w", r.ref.Context(), err)
	}
	sent, err := up.put(ctx, b)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool { return d.Code == transport.DigestInvalidErrorCode }) {
			// The registry hashed what we sent (checksDigests): the seed's file is not
			// what its manifest says.
			return sent, fmt.Errorf("%s: %w: the registry found the bytes sent are not its digest %s, so the seed changed since it was sealed; run seed verify (%w)",
				b.what, seed.ErrBadSeed, b.desc.Digest, err)
		}
		return sent, fmt.Errorf("uploading %s (%s) to %s: %w", b.what, b.desc.Digest, r.ref.Context(), err)
	}
	return sent, nil
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

// fetchUnchecked opens blob d without go-containerregistry's sha256 check of its bytes,
// for a caller that checks them itself.
func (r *registry) fetchUnchecked(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	var rc io.ReadCloser
	c, err := r.blobs(ctx, false)
	if err == nil {
		rc, err = c.get(ctx, d.Digest)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching blob %s from %s: %w", d.Digest, r.ref.Context(), err)
	}
	return rc, nil
}

// fetchRange opens n bytes of blob d from off, unchecked (blobClient.getRange).
func (r *registry) fetchRange(ctx context.Context, d ocispec.Descriptor, off, n int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	c, err := r.blobs(ctx, false)
	if err == nil {
		rc, err = c.getRange(ctx, d.Digest, off, n)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching bytes %d to %d of blob %s from %s: %w", off, off+n, d.Digest, r.ref.Context(), err)
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

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
