package netlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// Peer says whom a Transport talks to and what its answers may hold.
type Peer struct {
	// Kind names the peer in errors: "registry", "API server", "server".
	Kind string
	// Body names what the answer to req holds and caps its length; a limit <= 0 leaves it
	// uncapped, for a blob whose reader checks it against its declared size.
	Body func(req *http.Request, resp *http.Response) (what string, limit int64)
	// Policy retries transient failures; the zero value is DefaultPolicy.
	Policy Policy
	// OwnsRetries says no client above the transport may ask again: the answer it hands up
	// carries no Retry-After, which the policy has honoured already. client-go asks again
	// after any 429 or 5xx with one, up to 10 times (client-go rest/with_retry.go,
	// withRetry.IsNextRetry and checkWait; rest/request.go, NewRequest sets maxRetries),
	// each time through this transport's own tries.
	OwnsRetries bool
}

// Transport wraps base so that every request through it is bounded: a stall timeout (taken
// from the request's context, see WithStallTimeout) on the answer, the upload and the body;
// the body cap of p.Body; and p.Policy's retries of connection failures and of 408, 429 and
// 5xx answers (a Retry-After is honoured within the policy's bound). A request whose body
// cannot be sent again (no GetBody) is tried once.
func Transport(base http.RoundTripper, p Peer) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	p.Policy = p.Policy.OrDefault()
	return &transport{base: base, peer: p}
}

type transport struct {
	base http.RoundTripper
	peer Peer
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	pol := t.peer.Policy
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	try := req
	for n := 1; ; n++ {
		resp, err := t.once(try)
		retry := (err != nil && Transient(err)) || (err == nil && RetryStatus(resp.StatusCode))
		if !retry || !replayable || req.Context().Err() != nil {
			return t.handUp(resp), err
		}
		if n == pol.Attempts {
			if err != nil && n > 1 {
				return nil, t.spent(req, n, err)
			}
			if err != nil {
				return nil, err // one try: the caller owns the retries (Policy.Do)
			}
			return t.handUp(resp), nil // the caller reads the last answer's status and explanation
		}
		var after time.Duration
		if resp != nil {
			after = retryAfter(resp.Header.Get("Retry-After"), time.Now())
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
			resp.Body.Close()
		}
		if err := pol.pause(req.Context(), pol.wait(n, after)); err != nil {
			return nil, err
		}
		if try, err = again(req); err != nil {
			return nil, err
		}
	}
}

// handUp is the answer the transport returns: without its Retry-After when the transport
// owns the retries.
func (t *transport) handUp(resp *http.Response) *http.Response {
	if t.peer.OwnsRetries && resp != nil {
		resp.Header.Del("Retry-After")
	}
	return resp
}

// spent is the error of a request that failed on every try. Where the transport owns the
// retries it is sealed, its cause told in words of its own and not unwrapped: client-go asks
// a GET again, ten times, after an error that is or reads as a reset or closed connection
// (client-go rest/request.go, Request.request, isErrRetryableFunc; apimachinery
// pkg/util/net/http.go, IsConnectionReset matches the errno, IsProbableEOF the text).
func (t *transport) spent(req *http.Request, n int, err error) error {
	if !t.peer.OwnsRetries {
		return &ExhaustedError{Attempts: n, Err: err}
	}
	return &ExhaustedError{Attempts: n, Err: sealedError(t.peer.Kind + " " + req.URL.Host + " " + lost(err))}
}

// lost says how a connection failed, for a sealed error.
func lost(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset the connection"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused the connection"
	case errors.Is(err, syscall.EPIPE):
		return "closed the connection while the request was sent"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "closed the connection before it answered"
	}
	return "failed: " + err.Error()
}

// sealedError is an error whose cause is in its text only.
type sealedError string

func (e sealedError) Error() string { return string(e) }

// again is req ready to be sent once more, with a fresh body.
func again(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// once sends req with a watchdog that cancels it when neither side makes progress for the
// stall timeout, and caps the body of the answer.
func (t *transport) once(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{stall: &StallError{Kind: t.peer.Kind, Peer: req.URL.Host, Limit: StallTimeout(req.Context())}}
	w.timer = time.AfterFunc(w.stall.Limit, func() { cancel(w.err()) })
	r := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		r.Body = &progressReader{ReadCloser: req.Body, w: w}
		if req.GetBody != nil {
			// net/http sends a body again itself on a reused connection that was closed:
			// that copy is progress too.
			r.GetBody = func() (io.ReadCloser, error) {
				b, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				return &progressReader{ReadCloser: b, w: w}, nil
			}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		w.timer.Stop()
		cancel(nil)
		return nil, stalled(ctx, err)
	}
	var what string
	var limit int64
	if t.peer.Body != nil {
		what, limit = t.peer.Body(req, resp)
	}
	w.receiving(what)
	if limit > 0 && resp.ContentLength > limit {
		w.timer.Stop()
		cancel(nil)
		resp.Body.Close()
		return nil, &TooLargeError{Kind: t.peer.Kind, Peer: req.URL.Host, What: what, Limit: limit}
	}
	resp.Body = &body{rc: resp.Body, ctx: ctx, w: w, cancel: cancel, limit: limit,
		big: &TooLargeError{Kind: t.peer.Kind, Peer: req.URL.Host, What: what, Limit: limit}}
	return resp, nil
}

// stalled is err, or the stall that caused it.
func stalled(ctx context.Context, err error) error {
	var se *StallError
	if c := context.Cause(ctx); errors.As(c, &se) {
		return se
	}
	return err
}

// watchdog cancels a request once no progress was made for the stall timeout.
type watchdog struct {
	timer *time.Timer
	stall *StallError
	what  atomic.Pointer[string]
}

func (w *watchdog) progress() { w.timer.Reset(w.stall.Limit) }

// receiving marks the answer begun: a stall from now on is in its body.
func (w *watchdog) receiving(what string) {
	if what == "" {
		what = "answer"
	}
	w.what.Store(&what)
	w.progress()
}

func (w *watchdog) err() error {
	e := *w.stall
	if p := w.what.Load(); p != nil {
		e.What = *p
	}
	return &e
}

// progressReader is an upload body: each read the transport makes is progress.
type progressReader struct {
	io.ReadCloser
	w *watchdog
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if n > 0 {
		p.w.progress()
	}
	return n, err
}

// body is an answer's body under the watchdog and the cap.
type body struct {
	rc     io.ReadCloser
	ctx    context.Context
	w      *watchdog
	cancel context.CancelCauseFunc
	limit  int64
	n      int64
	big    *TooLargeError
}

func (b *body) Read(p []byte) (int, error) {
	if b.limit > 0 && b.n > b.limit {
		return 0, b.big
	}
	if b.limit > 0 && int64(len(p)) > b.limit+1-b.n {
		p = p[:b.limit+1-b.n] // one byte past the cap is enough to know it is over
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if n > 0 {
		b.w.progress()
	}
	if b.limit > 0 && b.n > b.limit {
		return n - int(b.n-b.limit), b.big
	}
	switch {
	case err == io.EOF:
		b.w.timer.Stop() // all there: the caller may take its time to close
	case err != nil:
		err = stalled(b.ctx, err)
	}
	return n, err
}

func (b *body) Close() error {
	b.w.timer.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}
