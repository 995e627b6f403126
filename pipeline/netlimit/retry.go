package netlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Policy is how often and how patiently a transient failure is retried. Every request goes
// through the same one (Transport for failures before the body, Do for a body that breaks),
// so a 500 on a chunk blob is retried exactly as one on a manifest.
type Policy struct {
	Attempts int           // tries in all, the first included
	Backoff  time.Duration // the first wait; each next one doubles
	MaxWait  time.Duration // bounds one wait, a Retry-After included
	// GiveUp, when set, reports an error that no further try of this peer will mend though
	// Transient says one might: a caller with another peer to ask (a mirror) moves on at
	// once instead of waiting on a peer that is not there.
	GiveUp func(error) bool
	// Rand draws the jitter of a backoff wait, in [0, n); nil is math/rand. Tests set it to
	// make the waits exact.
	Rand func(n int64) int64
	// Sleep waits d unless ctx ends first; nil is a timer. Tests set it to see each wait
	// chosen without spending it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// The default policy: five tries over about four seconds of backoff, a Retry-After honoured
// up to 30 seconds.
const (
	defaultAttempts = 5
	defaultBackoff  = 250 * time.Millisecond
	defaultMaxWait  = 30 * time.Second
)

// DefaultPolicy is the policy every client of the project uses.
func DefaultPolicy() Policy {
	return Policy{Attempts: defaultAttempts, Backoff: defaultBackoff, MaxWait: defaultMaxWait}
}

// OrDefault is p with DefaultPolicy in place of each unset field.
func (p Policy) OrDefault() Policy {
	d := DefaultPolicy()
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.Backoff <= 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxWait <= 0 {
		p.MaxWait = d.MaxWait
	}
	return p
}

// wait is the pause before try n+1 (n counted from 1): the backoff doubled per try, its
// second half drawn at random so that parallel transfers that failed together do not all
// ask again at the same instant; or the peer's Retry-After, as given. Either within MaxWait.
func (p Policy) wait(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, p.MaxWait)
	}
	d := min(p.Backoff<<min(n-1, 16), p.MaxWait)
	draw := p.Rand
	if draw == nil {
		draw = rand.Int64N
	}
	return d/2 + time.Duration(draw(int64(d/2)+1))
}

// RetryStatus reports whether an answer with this status is worth asking again: the
// request timed out (408), the peer is throttling (429), or it failed on its side (500,
// 502, 503, 504). 501 and 505 are answers that will not change.
func RetryStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Transient reports whether err is a transfer broken on the way (a reset, a refused
// connection, a body cut short) that asking again can mend. A stall, a body over its cap,
// a cancelled context and a transport that already spent its tries are not.
func Transient(err error) bool {
	var se *StallError
	var tl *TooLargeError
	var ex *ExhaustedError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &se), errors.As(err, &tl), errors.As(err, &ex):
		return false
	}
	var re *retryableError
	var st *StatusError
	if errors.As(err, &st) {
		return RetryStatus(st.Code)
	}
	return errors.As(err, &re) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// Retryable marks err as worth asking again, for a caller whose client reports a failed
// answer in a form Transient cannot read (containers/image puts the status into its error),
// so that its retries still go through Policy.Do. The error reads and unwraps as err.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// ExhaustedError is a request that failed transiently on every try.
type ExhaustedError struct {
	Attempts int
	Err      error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("giving up after %d tries: %v", e.Attempts, e.Err)
}

func (e *ExhaustedError) Unwrap() error { return e.Err }

// Do runs fn until it succeeds, fails for good (not Transient, or GiveUp) or the tries run
// out. It is for what a transport cannot retry by itself: a body that breaks after its
// answer began, which fn fetches again from the start (its caller checks what it reads), and
// a caller that owns the retries of its requests (a *StatusError carries the Retry-After of
// the answer it reports).
func (p Policy) Do(ctx context.Context, fn func() error) error {
	p = p.OrDefault()
	for n := 1; ; n++ {
		err := fn()
		if !Transient(err) || ctx.Err() != nil || (p.GiveUp != nil && p.GiveUp(err)) {
			return err
		}
		if n == p.Attempts {
			return &ExhaustedError{Attempts: n, Err: err}
		}
		var after time.Duration
		if st := (*StatusError)(nil); errors.As(err, &st) {
			after = st.RetryAfter
		}
		if err := p.pause(ctx, p.wait(n, after)); err != nil {
			return err
		}
	}
}

// StatusError is an answer that is not a success, for a caller that reads the status
// itself: Transient as RetryStatus says, and Do waits the Retry-After it carries.
type StatusError struct {
	Method, URL string
	Code        int
	RetryAfter  time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Code, http.StatusText(e.Code))
}

// AnswerError is resp, an answer that is not a success, as a *StatusError. It drains (a
// little) and closes the body, so the connection can be used again.
func AnswerError(resp *http.Response) *StatusError {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	e := &StatusError{Code: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if resp.Request != nil {
		// Without its query: a registry's redirect to a CDN signs the URL there.
		u := *resp.Request.URL
		u.RawQuery, u.User = "", nil
		e.Method, e.URL = resp.Request.Method, u.String()
	}
	return e
}

// pause waits d through p.Sleep, or a timer.
func (p Policy) pause(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return sleep(ctx, d)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date (RFC 9110 §10.2.3).
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
