package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/pipeline/smallfile"
)

// Options tunes a download.
type Options struct {
	// Client is the HTTP client; nil means http.DefaultClient. Its transport is wrapped in
	// netlimit.Transport: the stall timeout and retry policy of every request.
	Client *http.Client
	// Retry is the retry policy of every request and of a body cut short; its unset fields
	// are netlimit.DefaultPolicy's.
	Retry netlimit.Policy
	// Progress, if set, is called with bytes done and total (0 if unknown).
	Progress func(done, total int64)
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Path is where the store keeps a blob with this digest.
func Path(store, sha string) string {
	return filepath.Join(store, "sha256", sha)
}

// File makes the content at rawURL (http, https or file) available in store (a
// blobstore directory) under its sha256 and returns its path. A blob already in the store is
// not fetched again. A partial download left by an interrupted run is resumed. Content that
// does not match sha256 never enters the store.
func File(ctx context.Context, rawURL, sha, store string, opts Options) (string, error) {
	if !hexDigest.MatchString(sha) {
		return "", fmt.Errorf("fetching %s: sha256 %q is not 64 lowercase hex digits", rawURL, sha)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	if u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("fetching %s: unsupported scheme %q (want http, https or file)", rawURL, u.Scheme)
	}
	st, err := blobstore.Open(store)
	if err != nil {
		return "", err
	}
	d := digest.NewDigestFromEncoded(digest.SHA256, sha)
	// Builds sharing the store may fetch the same file at once: one downloads, the others
	// wait and then find it in the store.
	w, stored, err := st.Acquire(ctx, d)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	if stored {
		return st.Path(d), nil
	}
	defer w.Release()
	if u.Scheme == "file" {
		err = copyLocal(ctx, u.Path, w, opts)
	} else {
		err = download(ctx, rawURL, w, opts)
	}
	if err != nil {
		return "", err
	}
	if err := w.Commit(); err != nil {
		if de := (*blobstore.DigestError)(nil); errors.As(err, &de) {
			return "", fmt.Errorf("fetching %s: content has sha256 %s, want %s; the download was discarded (check the URL and the checksum in the blueprint)", rawURL, de.Got.Encoded(), sha)
		}
		return "", fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	return st.Path(d), nil
}

// copyLocal copies a local file into w from the start: a local copy is cheap to redo.
func copyLocal(ctx context.Context, src string, w *blobstore.Writer, opts Options) error {
	// A local source is a user's file: a FIFO or a device would block or never end.
	in, err := smallfile.Open(src)
	if err != nil {
		return fmt.Errorf("fetching file://%s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("fetching file://%s: %w", src, err)
	}
	if err := w.Reset(); err != nil {
		return err
	}
	if _, err := io.Copy(w, &progressReader{ctx: ctx, r: in, total: st.Size(), fn: opts.Progress}); err != nil {
		return fmt.Errorf("fetching file://%s: %w", src, err)
	}
	return nil
}

// download fetches rawURL into w, resuming from w's offset.
func download(ctx context.Context, rawURL string, w *blobstore.Writer, opts Options) error {
	pol := opts.Retry.OrDefault()
	client := &http.Client{}
	if opts.Client != nil {
		*client = *opts.Client
	}
	client.Transport = netlimit.Transport(client.Transport, netlimit.Peer{Kind: "server", Policy: pol})
	// Answers the transport already retried (5xx, 429, with their Retry-After) come back
	// final, as does a stalled server; a body cut short resumes from where it stopped,
	// after the policy's jittered wait, like every other retry of the project.
	err := pol.Do(ctx, func() error {
		return downloadOnce(ctx, client, rawURL, w, opts.Progress)
	})
	var spent *netlimit.ExhaustedError
	if err != nil && !errors.As(err, &spent) && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("fetching %s: %w", rawURL, err)
	}
	return nil
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// downloadOnce asks once for what w lacks of rawURL. A body cut short is worth asking
// again (netlimit.Transient); a refused answer or a bad request is not.
func downloadOnce(ctx context.Context, client *http.Client, rawURL string, w *blobstore.Writer, progress func(int64, int64)) error {
	have := w.Offset()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return &permanentError{err}
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var total int64 = -1
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		total = contentRangeTotal(resp.Header.Get("Content-Range"))
	case resp.StatusCode == http.StatusOK:
		// The server ignored the Range header: start over.
		if err := w.Reset(); err != nil {
			return err
		}
		have = 0
		total = resp.ContentLength
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// We already have everything (or a stale partial): verify decides.
		return nil
	default:
		return &permanentError{fmt.Errorf("GET %s: %s", rawURL, resp.Status)}
	}
	pr := &progressReader{ctx: ctx, r: resp.Body, done: have, total: total, fn: progress}
	n, err := io.Copy(w, pr)
	if err != nil {
		return fmt.Errorf("GET %s: after %d bytes: %w", rawURL, have+n, err)
	}
	if total > 0 && have+n < total {
		return netlimit.Retryable(fmt.Errorf("GET %s: body ended at %d of %d bytes", rawURL, have+n, total))
	}
	return nil
}

func contentRangeTotal(h string) int64 {
	i := strings.LastIndexByte(h, '/')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(h[i+1:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

type progressReader struct {
	ctx         context.Context
	r           io.Reader
	done, total int64
	fn          func(int64, int64)
	last        time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.fn != nil && (time.Since(p.last) > 200*time.Millisecond || err == io.EOF) {
		p.last = time.Now()
		t := p.total
		if t < 0 {
			t = 0
		}
		p.fn(p.done, t)
	}
	return n, err
}
