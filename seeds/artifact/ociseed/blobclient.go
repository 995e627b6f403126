package ociseed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
)

// blobClient moves blobs of one repository with the fewest requests the distribution spec
// allows. An upload is a POST that asks the registry to mount the blob it may have (put)
// and opens an upload when it lacks it, then one PUT that sends the whole blob and commits
// it: go-containerregistry's Upload sends
// the bytes in a PATCH between the two, one request more per blob, and a seed of thousands
// of chunk blobs pays each request thousands of times; registries spend most of a small
// blob's time on the requests, not the bytes. A download is one GET whose bytes the caller
// checks (go-containerregistry would hash them with sha256 on top).
type blobClient struct {
	client *http.Client
	repo   name.Repository
	// probe runs probeMount once; mounts is its answer, read only after probe.Do returns.
	probe  sync.Once
	mounts bool
}

// newBlobClient authenticates for scope (transport.PushScope or PullScope) on repo as
// go-containerregistry does (the keychain, bearer tokens). Retries, the stall timeout and
// the body caps are o.transport's (netlimit.Transport), the same as for manifests:
// go-containerregistry's transport.NewRetry, used here before, retries only errors that say
// they are temporary and no status code unless given some (pkg/v1/remote/transport/retry.go,
// NewRetry; remote's own list is set in pkg/v1/remote/options.go, makeOptions), so a chunk
// blob answered with one 500 failed the pull where a manifest was asked again.
func newBlobClient(ctx context.Context, repo name.Repository, o options, scope string) (*blobClient, error) {
	auth, err := authn.Resolve(ctx, o.keychain, repo)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repo, err)
	}
	base := transport.NewUserAgent(o.transport, "snofactory")
	tr, err := transport.NewWithContext(ctx, repo.Registry, auth, base, []string{repo.Scope(scope)})
	if err != nil {
		return nil, err
	}
	return &blobClient{client: &http.Client{Transport: tr}, repo: repo}, nil
}

func (u *blobClient) url(path string) *url.URL {
	return &url.URL{Scheme: u.repo.Scheme(), Host: u.repo.RegistryStr(), Path: "/v2/" + u.repo.RepositoryStr() + path}
}

// put uploads b unless the repository has it, and returns the bytes sent. A registry that
// refuses the bytes for their digest answers with a *transport.Error.
//
// On a registry that mounts, one POST both asks whether the repository has the blob and
// opens its upload: it asks to mount the blob from this same repository (distribution spec,
// "Mounting a blob from another repository"). Having the blob, the registry links it and
// answers 201 Created, one request in all; lacking it, it opens an upload session and
// answers 202 Accepted, as for a plain POST (distribution's registry/handlers/blobupload.go,
// StartBlobUpload; registry/storage/linkedblobstore.go, linkedBlobStore.Create falls through
// to a new upload when the mount fails). A HEAD before the POST, as go-containerregistry's
// remote.Write (pkg/v1/remote/write.go, checkExistingBlob) does, is a third request for
// every missing blob, and a first push misses them all. But a registry that does not mount
// also answers 202 (the spec's SHOULD), for blobs it has too, so the first blob put proves
// mounting (probeMount); without that proof every blob is HEADed first, as before.
// Monolithic `POST ?digest=` would save the PUT as well, but distribution's
// StartBlobUpload ignores the digest and answers 202 without reading the body.
func (u *blobClient) put(ctx context.Context, b blob) (int64, error) {
	var sent int64
	var err error
	probed := false
	u.probe.Do(func() { probed = true; sent, err = u.probeMount(ctx, b) })
	if probed {
		return sent, err
	}
	if u.mounts {
		return u.startUpload(ctx, b, true)
	}
	if has, err := u.has(ctx, b.desc.Digest); err != nil || has {
		return 0, err
	}
	return u.startUpload(ctx, b, false)
}

// probeMount puts b after a HEAD, then asks to mount it where it now is: 201 proves the
// registry mounts (u.mounts), 202 that it does not, and the upload it opened is cancelled.
// Only the first put runs it; the others wait for its answer.
func (u *blobClient) probeMount(ctx context.Context, b blob) (int64, error) {
	var sent int64
	has, err := u.has(ctx, b.desc.Digest)
	if err == nil && !has {
		sent, err = u.startUpload(ctx, b, false)
	}
	if err != nil {
		return sent, err
	}
	resp, err := u.post(ctx, b.desc.Digest, true)
	var te *transport.Error
	if errors.As(err, &te) {
		return sent, nil // a registry that refuses the mount's query does not mount
	}
	if err != nil {
		return sent, err
	}
	defer resp.Body.Close()
	u.mounts = resp.StatusCode == http.StatusCreated
	if loc, err := resp.Location(); err == nil && !u.mounts {
		u.cancel(ctx, loc)
	}
	return sent, nil
}

// has says whether the repository has blob d (a HEAD).
func (u *blobClient) has(ctx context.Context, d digest.Digest) (bool, error) {
	head, err := http.NewRequestWithContext(ctx, http.MethodHead, u.url("/blobs/"+d.String()).String(), nil)
	if err != nil {
		return false, err
	}
	resp, err := u.client.Do(head)
	if err != nil {
		return false, err
	}
	// CheckError reads the registry's explanation from the body before it is closed.
	err = transport.CheckError(resp, http.StatusOK, http.StatusNotFound)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, err
}

// post opens an upload of d, asking to mount it from this repository if mount is set; the
// answer is 201 (mounted) or 202 (an upload session, at the response's Location).
func (u *blobClient) post(ctx context.Context, d digest.Digest, mount bool) (*http.Response, error) {
	start := u.url("/blobs/uploads/")
	if mount {
		start.RawQuery = url.Values{"mount": {d.String()}, "from": {u.repo.RepositoryStr()}}.Encode()
	}
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, start.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := u.client.Do(post)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusCreated, http.StatusAccepted); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// startUpload opens an upload of b (asking to mount it first if mount is set) and sends it,
// unless the registry mounted it.
func (u *blobClient) startUpload(ctx context.Context, b blob, mount bool) (int64, error) {
	resp, err := u.post(ctx, b.desc.Digest, mount)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		return 0, nil // the repository had it
	}
	loc, err := resp.Location()
	if err != nil {
		return 0, fmt.Errorf("the registry opened an upload without a location: %w", err)
	}
	return u.send(ctx, loc, b)
}

// cancel ends the upload session at loc (distribution spec: DELETE on the session cancels
// it). A failure is ignored: the registry expires abandoned sessions.
func (u *blobClient) cancel(ctx context.Context, loc *url.URL) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc.String(), nil)
	if err != nil {
		return
	}
	if resp, err := u.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

// send PUTs the whole of b to the upload session at loc, committing it under its digest.
func (u *blobClient) send(ctx context.Context, loc *url.URL, b blob) (int64, error) {
	q := loc.Query()
	q.Set("digest", b.desc.Digest.String())
	loc.RawQuery = q.Encode()

	var sent atomic.Int64
	open := func() (io.ReadCloser, error) {
		rc, err := b.open()
		if err != nil {
			return nil, err
		}
		sent.Store(0)
		return countingReader{rc, &sent}, nil
	}
	body, err := open()
	if err != nil {
		return 0, err
	}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), body)
	if err != nil {
		body.Close()
		return 0, err
	}
	put.ContentLength = b.desc.Size
	put.GetBody = open // a retried PUT sends the blob again from its start
	put.Header.Set("Content-Type", "application/octet-stream")
	resp, err := u.client.Do(put)
	if err != nil {
		return sent.Load(), err
	}
	defer resp.Body.Close()
	return sent.Load(), transport.CheckError(resp, http.StatusCreated)
}

// get opens blob d for reading, unchecked: the caller checks what it reads.
func (u *blobClient) get(ctx context.Context, d digest.Digest) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url("/blobs/"+d.String()).String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// getRange opens n bytes of blob d from off, unchecked: the caller checks what it reads.
// A registry need not honour a range (the OCI distribution spec leaves Range support to
// the registry, spec.md "Pulling blobs"; RFC 9110 §14.2 lets any server ignore the header
// and answer 200 with the whole content): then the bytes before off are read and
// dropped, at most the index's bound on a group (diskpack.MaxGroupSize). A 206 must
// name exactly the range asked for.
func (u *blobClient) getRange(ctx context.Context, d digest.Digest, off, n int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url("/blobs/"+d.String()).String(), nil)
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("bytes %d-%d/", off, off+n-1)
	req.Header.Set("Range", "bytes="+strings.TrimSuffix(strings.TrimPrefix(want, "bytes "), "/"))
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK, http.StatusPartialContent); err != nil {
		resp.Body.Close()
		return nil, err
	}
	if resp.StatusCode == http.StatusPartialContent {
		if got := resp.Header.Get("Content-Range"); !strings.HasPrefix(got, want) {
			resp.Body.Close()
			return nil, fmt.Errorf("blob %s: asked for bytes %d-%d, the registry answered with Content-Range %q", d, off, off+n-1, got)
		}
		return limitedBody(resp.Body, n), nil
	}
	return skipTo(resp.Body, off, n)
}

// skipTo reads and drops the first off bytes of body, and returns its next n.
func skipTo(body io.ReadCloser, off, n int64) (io.ReadCloser, error) {
	if off > diskpack.MaxGroupSize {
		body.Close()
		return nil, fmt.Errorf("a range at %d, past the %d bytes a chunk group may hold", off, diskpack.MaxGroupSize)
	}
	if k, err := io.CopyN(io.Discard, body, off); err != nil {
		body.Close()
		return nil, fmt.Errorf("skipping to byte %d of the blob (%d read): %w", off, k, err)
	}
	return limitedBody(body, n), nil
}

type limitedReadCloser struct {
	io.Reader
	io.Closer
}

// limitedBody reads at most n bytes of body.
func limitedBody(body io.ReadCloser, n int64) io.ReadCloser {
	return limitedReadCloser{io.LimitReader(body, n), body}
}
