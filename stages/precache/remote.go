package precache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/pkg/docker/config"
	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// manifestAccept is every manifest type we can store.
var manifestAccept = strings.Join([]string{
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
}, ", ")

// errShort is a blob body that ended before the blob's size: asking again resumes it.
var errShort = errors.New("response body shorter than the blob")

// remote reaches registries: mirrors from registries.conf, credentials from the standard
// auth files, and a token-authenticating transport per repository.
type remote struct {
	sys   *types.SystemContext
	retry netlimit.Policy
	base  *http.Transport

	retries atomic.Int64

	mu     sync.Mutex
	repos  map[string]*repoClient // "scheme://host/repo"
	scheme map[string]string      // host -> scheme, for insecure endpoints
	down   map[string]time.Time   // host -> when it was last unreachable
}

// repoClient is an authenticated client for one repository on one endpoint. Requests go
// through an http.Client so redirects (registries hand blobs to a CDN) are followed; the
// token transport only authenticates requests to the registry host itself.
type repoClient struct {
	url string // scheme://host/v2/repo
	hc  *http.Client
}

func newRemote(sys *types.SystemContext, jobs int, retry netlimit.Policy) *remote {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = jobs + 2
	base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return &remote{sys: sys, retry: retry, base: base, repos: map[string]*repoClient{}, scheme: map[string]string{}, down: map[string]time.Time{}}
}

func (r *remote) close() { r.base.CloseIdleConnections() }

// source is one place an image can be pulled from.
type source struct {
	ref      reference.Named
	insecure bool
}

// sources lists where ref can be pulled from, mirrors first, as registries.conf says.
func (r *remote) sources(ref reference.Named) ([]source, error) {
	reg, err := sysregistriesv2.FindRegistry(r.sys, ref.String())
	if err != nil {
		return nil, fmt.Errorf("reading registries configuration: %w", err)
	}
	if reg == nil {
		return []source{{ref: ref}}, nil
	}
	pss, err := reg.PullSourcesFromReference(ref)
	if err != nil {
		return nil, fmt.Errorf("finding mirrors of %s: %w", ref, err)
	}
	var out []source
	for _, ps := range pss {
		out = append(out, source{ref: ps.Reference, insecure: ps.Endpoint.Insecure})
	}
	return out, nil
}

// client returns the authenticated client for the repository of src.
func (r *remote) client(ctx context.Context, src source) (*repoClient, error) {
	host := reference.Domain(src.ref)
	repo := reference.Path(src.ref)
	scheme, err := r.schemeFor(ctx, host, src.insecure)
	if err != nil {
		return nil, err
	}
	key := scheme + "://" + host + "/" + repo
	r.mu.Lock()
	c, ok := r.repos[key]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	var opts []name.Option
	if src.insecure || scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	nr, err := name.NewRepository(host+"/"+repo, opts...)
	if err != nil {
		return nil, fmt.Errorf("repository %s/%s: %w", host, repo, err)
	}
	auth := authn.Anonymous
	cred, err := config.GetCredentials(r.sys, host)
	if err != nil {
		return nil, fmt.Errorf("reading credentials for %s: %w", host, err)
	}
	if cred.Username != "" || cred.IdentityToken != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: cred.Username, Password: cred.Password, IdentityToken: cred.IdentityToken})
	}
	base := r.base
	if src.insecure {
		base = r.insecureBase()
	}
	// The stall timeout and body caps of every registry request (netlimit); the tries are
	// withRetry's, under the same policy, which also fails over from one mirror to the next.
	peer := netlimit.Registry()
	peer.Policy.Attempts = 1
	rt, err := transport.NewWithContext(ctx, nr.Registry, auth, netlimit.Transport(base, peer), []string{nr.Scope(transport.PullScope)})
	if err != nil {
		return nil, fmt.Errorf("authenticating to %s: %w", nr, err)
	}
	c = &repoClient{url: scheme + "://" + host + "/v2/" + repo, hc: &http.Client{Transport: rt}}
	r.mu.Lock()
	r.repos[key] = c
	r.mu.Unlock()
	return c, nil
}

func (r *remote) insecureBase() *http.Transport {
	t := r.base.Clone()
	t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user marked this registry insecure
	return t
}

// schemeFor is https, except for insecure registries that do not speak TLS.
func (r *remote) schemeFor(ctx context.Context, host string, insecure bool) (string, error) {
	if !insecure {
		return "https", nil
	}
	r.mu.Lock()
	s, ok := r.scheme[host]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	s = "http"
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(pctx, http.MethodGet, "https://"+host+"/v2/", nil)
	if resp, err := (&http.Client{Transport: r.insecureBase()}).Do(req); err == nil {
		resp.Body.Close()
		s = "https"
	} else if ctx.Err() != nil {
		return "", ctx.Err()
	}
	r.mu.Lock()
	r.scheme[host] = s
	r.mu.Unlock()
	return s, nil
}

// unreachable reports whether err says nothing listens at the endpoint (refused, no route,
// unknown host): with another source to try, retrying this one only wastes time.
func unreachable(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.As(err, &dns)
}

// downFor is how long an unreachable endpoint is tried last.
const downFor = time.Minute

// order puts endpoints that were unreachable recently at the end, keeping the rest in
// registries.conf order, so a dead mirror costs one failed connection, not one per blob.
func (r *remote) order(srcs []source) []source {
	r.mu.Lock()
	defer r.mu.Unlock()
	var up, down []source
	for _, s := range srcs {
		if t, ok := r.down[reference.Domain(s.ref)]; ok && time.Since(t) < downFor {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	return append(up, down...)
}

func (r *remote) markDown(src source) {
	r.mu.Lock()
	r.down[reference.Domain(src.ref)] = time.Now()
	r.mu.Unlock()
}

// withRetry runs op against each source in turn, each under the one retry policy
// (netlimit.Policy.Do: jittered backoff, a Retry-After honoured). A source that answers "not
// found", fails for good, stalls or spends its tries hands over to the next one; one that
// does not answer at all hands over at once and is tried last for a while (markDown).
func (r *remote) withRetry(ctx context.Context, what string, srcs []source, op func(context.Context, source) error) error {
	var errs []error
	srcs = r.order(srcs)
	for i, src := range srcs {
		pol := r.retry
		pol.GiveUp = func(err error) bool { return unreachable(err) && i < len(srcs)-1 }
		tries := 0
		err := pol.Do(ctx, func() error {
			if tries++; tries > 1 {
				r.retries.Add(1)
			}
			err := op(ctx, src)
			if unreachable(err) {
				r.markDown(src)
			}
			return retryable(err)
		})
		if err == nil || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Errorf("from %s: %w", reference.Domain(src.ref), err))
	}
	return fmt.Errorf("%s: %w", what, errors.Join(errs...))
}

// retryable marks what this stage asks again beyond what netlimit.Transient covers: a
// blob or manifest whose bytes do not match their digest (a mirror or proxy that mangled
// one transfer), a blob body that ended early, and a throttled or failing answer to the
// token handshake, which go-containerregistry reports as its own transport.Error.
func retryable(err error) error {
	var de *blobstore.DigestError
	var te *transport.Error
	if errors.As(err, &de) || errors.Is(err, errShort) ||
		errors.As(err, &te) && netlimit.RetryStatus(te.StatusCode) {
		return netlimit.Retryable(err)
	}
	return err
}

// get issues a GET for path below the repository, with optional headers.
func (c *repoClient) get(ctx context.Context, path string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent {
		return resp, nil
	}
	return nil, netlimit.AnswerError(resp)
}

// fetchManifest returns the verified manifest with digest d of the image at ref.
func (r *remote) fetchManifest(ctx context.Context, ref reference.Named, d digest.Digest) (data []byte, mediaType string, err error) {
	// Mirrors are chosen for the digest reference: ICSP/IDMS mirrors serve digests only.
	dr, err := reference.WithDigest(reference.TrimNamed(ref), d)
	if err != nil {
		return nil, "", err
	}
	srcs, err := r.sources(dr)
	if err != nil {
		return nil, "", err
	}
	err = r.withRetry(ctx, "fetching manifest "+dr.String(), srcs, func(ctx context.Context, src source) error {
		c, err := r.client(ctx, src)
		if err != nil {
			return err
		}
		resp, err := c.get(ctx, "/manifests/"+d.String(), map[string]string{"Accept": manifestAccept})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body) // capped by the transport (netlimit.MaxManifest)
		if err != nil {
			return err
		}
		if got := d.Algorithm().FromBytes(b); got != d {
			return &blobstore.DigestError{Want: d, Got: got}
		}
		data, mediaType = b, resp.Header.Get("Content-Type")
		return nil
	})
	return data, mediaType, err
}

// fetchBlob downloads blob d of the repository of ref into the store, resuming a partial
// download with HTTP Range, and returns the bytes received from the network. counted is
// called with every chunk received, for progress.
func (r *remote) fetchBlob(ctx context.Context, st *blobstore.Store, ref reference.Named, d digest.Digest, size int64, counted func(int64)) (int64, error) {
	p, done, err := st.Acquire(ctx, d)
	if err != nil || done {
		return 0, err
	}
	defer p.Release()
	// ref is the image's digest reference, so digest-only mirrors apply to its blobs.
	srcs, err := r.sources(ref)
	if err != nil {
		return 0, err
	}
	var fetched int64
	err = r.withRetry(ctx, "fetching blob "+d.String()+" of "+reference.TrimNamed(ref).String(), srcs, func(ctx context.Context, src source) error {
		if p.Offset() > size {
			if err := p.Reset(); err != nil {
				return err
			}
		}
		if p.Offset() == size {
			return p.Commit()
		}
		c, err := r.client(ctx, src)
		if err != nil {
			return err
		}
		hdr := map[string]string{}
		if p.Offset() > 0 {
			hdr["Range"] = "bytes=" + strconv.FormatInt(p.Offset(), 10) + "-"
		}
		resp, err := c.get(ctx, "/blobs/"+d.String(), hdr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if p.Offset() > 0 && (resp.StatusCode != http.StatusPartialContent || !strings.HasPrefix(resp.Header.Get("Content-Range"), "bytes "+strconv.FormatInt(p.Offset(), 10)+"-")) {
			// The server sent the whole blob (or another range): start over.
			if err := p.Reset(); err != nil {
				return err
			}
		}
		// The transport fails a body that stalls (netlimit.StallError): this source is then
		// given up for the next one.
		body := io.LimitReader(resp.Body, size-p.Offset()+1)
		_, err = io.Copy(&countingWriter{w: p, add: func(k int64) { fetched += k; counted(k) }}, body)
		if err != nil {
			return fmt.Errorf("reading blob %s: %w", d, err)
		}
		if p.Offset() < size {
			return errShort
		}
		return p.Commit()
	})
	return fetched, err
}

type countingWriter struct {
	w   io.Writer
	add func(int64)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.add(int64(n))
	return n, err
}
