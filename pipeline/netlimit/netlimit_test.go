package netlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// quick is a policy whose waits do not slow the tests.
var quick = Policy{Attempts: 3, Backoff: time.Millisecond, MaxWait: time.Millisecond}

// get runs one GET through Transport(Registry()) and reads the body whole.
func get(t *testing.T, url string, stall time.Duration) ([]byte, error) {
	t.Helper()
	p := Registry()
	p.Policy = quick
	c := &http.Client{Transport: Transport(nil, p)}
	ctx := WithStallTimeout(t.Context(), stall)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// A peer that stalls, before its answer or inside it, fails the request naming the peer
// and the limit; one that sends forever fails at the cap for what it sends.
func TestStallAndCap(t *testing.T) {
	endless := strings.Repeat("x", 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/r/manifests/silent":
			<-r.Context().Done() // the client gives up and closes the connection
		case "/v2/r/manifests/drip":
			w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/v2/r/manifests/endless":
			for r.Context().Err() == nil {
				if _, err := w.Write([]byte(endless)); err != nil {
					return
				}
			}
		case "/v2/r/referrers/sha256:x":
			w.Header().Set("Content-Length", "999999999")
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	// The stalls are tried under a small stall timeout; the caps under a long one, which a
	// loaded machine cannot reach between two reads of an endless body.
	for _, tc := range []struct {
		path, want string
		stall      time.Duration
	}{
		{"/v2/r/manifests/silent", "registry " + host + " answered nothing for 50ms (stall timeout", 50 * time.Millisecond},
		{"/v2/r/manifests/drip", "registry " + host + " sent no more of the manifest for", 50 * time.Millisecond},
		{"/v2/r/manifests/endless", "the manifest from registry " + host + " is larger than its cap of 4 MiB", time.Hour},
		{"/v2/r/referrers/sha256:x", "the referrers list from registry " + host + " is larger than its cap of 4 MiB", time.Hour},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := get(t, srv.URL+tc.path, tc.stall)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(tc.want, "answered") && !strings.Contains(err.Error(), "--stall-timeout") {
				t.Errorf("%v does not name the flag", err)
			}
			if Transient(err) {
				t.Errorf("%v is retried; a stall or an oversized answer is final", err)
			}
		})
	}
}

// Transient answers are retried with the same policy whatever is asked, a Retry-After
// within the bound included; an upload is sent again from its start.
func TestRetries(t *testing.T) {
	var tries atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := tries.Add(1)
		b, _ := io.ReadAll(r.Body)
		switch {
		case n == 1:
			w.Header().Set("Retry-After", "3600") // bounded by the policy's MaxWait
			w.WriteHeader(http.StatusServiceUnavailable)
		case n == 2:
			w.WriteHeader(http.StatusInternalServerError)
		case strings.HasSuffix(r.URL.Path, "/never"):
			w.WriteHeader(http.StatusBadGateway)
		default:
			fmt.Fprintf(w, "%s", b)
		}
	}))
	defer srv.Close()
	p := Registry()
	p.Policy = quick
	c := &http.Client{Transport: Transport(nil, p)}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/v2/r/blobs/uploads/x", strings.NewReader("payload"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "payload" || tries.Load() != 3 {
		t.Fatalf("after a 503 and a 500: %d %q in %d tries, want 200 \"payload\" in 3", resp.StatusCode, b, tries.Load())
	}

	tries.Store(2)
	resp, err = c.Get(srv.URL + "/v2/r/blobs/never")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || tries.Load() != 2+int64(quick.Attempts) {
		t.Errorf("a peer always failing: %d after %d tries, want 502 after %d", resp.StatusCode, tries.Load()-2, quick.Attempts)
	}
}

// A refused connection is retried, then reported as given up on, and not retried again by
// Do; a body that breaks is fetched again by Do.
func TestDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &http.Client{Transport: Transport(nil, Peer{Kind: "server", Policy: quick})}
	calls := 0
	err = quick.Do(t.Context(), func() error {
		calls++
		_, err := c.Get("http://" + addr + "/file")
		return err
	})
	var ex *ExhaustedError
	if !errors.As(err, &ex) || ex.Attempts != quick.Attempts || calls != 1 {
		t.Errorf("refused: %v after %d calls, want given up after %d tries in 1 call", err, calls, quick.Attempts)
	}

	// A transport of one try leaves the retries to its caller: the refusal reaches Do as it
	// is, and Do asks again.
	one := quick
	one.Attempts = 1
	c1 := &http.Client{Transport: Transport(nil, Peer{Kind: "server", Policy: one})}
	calls = 0
	err = quick.Do(t.Context(), func() error {
		calls++
		_, err := c1.Get("http://" + addr + "/file")
		return err
	})
	if !errors.As(err, &ex) || ex.Attempts != quick.Attempts || calls != quick.Attempts {
		t.Errorf("refused through one try: %v after %d calls, want given up after %d calls", err, calls, quick.Attempts)
	}

	calls = 0
	err = quick.Do(context.Background(), func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("broken body: %v after %d calls, want success on the 3rd", err, calls)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second,
	} {
		if got := retryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
	if got := quick.OrDefault().wait(1, time.Hour); got != quick.MaxWait {
		t.Errorf("a Retry-After of an hour waits %v, want the bound %v", got, quick.MaxWait)
	}
}

// An error a caller marks Retryable is tried again by Policy.Do, and still reads and
// unwraps as itself.
func TestRetryableIsTransient(t *testing.T) {
	base := errors.New("GET /v2/x/manifests/y: status code 503")
	err := Retryable(base)
	if !Transient(err) || err.Error() != base.Error() || !errors.Is(err, base) || Retryable(nil) != nil {
		t.Errorf("Retryable(%v) = %v: transient %v", base, err, Transient(err))
	}
	if Transient(base) {
		t.Errorf("an unmarked error was transient")
	}
}

// The options a caller that owns its retries uses: a Retry-After carried by a *StatusError
// is waited (within MaxWait) instead of the backoff, GiveUp ends the tries of one peer at
// once, and the backoff is jittered within its second half.
func TestPolicyOptions(t *testing.T) {
	unavailable := &StatusError{Method: "GET", URL: "https://r/v2/x/blobs/y", Code: 503, RetryAfter: 7 * time.Second}
	refused := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	for _, tc := range []struct {
		name   string
		err    error
		giveUp func(error) bool
		calls  int
		spent  bool
	}{
		{"a 503 is asked again until the tries run out", unavailable, nil, quick.Attempts, true},
		{"a 404 is final", &StatusError{Code: 404}, nil, 1, false},
		{"a refused connection is asked again", refused, nil, quick.Attempts, true},
		{"unless GiveUp says the peer is gone", refused, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }, 1, false},
		{"GiveUp sees only what is transient", &StatusError{Code: 401}, func(error) bool { return false }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := quick
			p.GiveUp = tc.giveUp
			calls := 0
			err := p.Do(t.Context(), func() error { calls++; return tc.err })
			var ex *ExhaustedError
			if calls != tc.calls || errors.As(err, &ex) != tc.spent || !errors.Is(err, tc.err) {
				t.Errorf("%d calls, error %v; want %d calls, exhausted %v", calls, err, tc.calls, tc.spent)
			}
		})
	}

	draw := func(pick int64) func(int64) int64 { return func(n int64) int64 { return min(pick, n-1) } }
	for _, tc := range []struct {
		name       string
		n          int
		retryAfter time.Duration
		rand       func(int64) int64
		want       time.Duration
	}{
		{"first wait, least jitter", 1, 0, draw(0), 50 * time.Millisecond},
		{"first wait, most jitter", 1, 0, draw(1 << 62), 100 * time.Millisecond},
		{"third wait doubles twice", 3, 0, draw(0), 200 * time.Millisecond},
		{"backoff bounded by MaxWait", 10, 0, draw(1 << 62), time.Second},
		{"Retry-After as given, no jitter", 1, 700 * time.Millisecond, draw(1 << 62), 700 * time.Millisecond},
		{"Retry-After bounded by MaxWait", 1, time.Hour, draw(0), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{Attempts: 3, Backoff: 100 * time.Millisecond, MaxWait: time.Second, Rand: tc.rand}
			if got := p.wait(tc.n, tc.retryAfter); got != tc.want {
				t.Errorf("wait(%d, %v) = %v, want %v", tc.n, tc.retryAfter, got, tc.want)
			}
		})
	}
}

// AnswerError reads the status and the Retry-After of a failed answer, and leaves a signed
// redirect's query out of the message.
func TestAnswerError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/blob?X-Amz-Signature=secret")
	if err != nil {
		t.Fatal(err)
	}
	e := AnswerError(resp)
	if e.Code != 429 || e.RetryAfter != 3*time.Second || !Transient(e) || strings.Contains(e.Error(), "secret") ||
		!strings.Contains(e.Error(), "GET "+srv.URL+"/blob: 429 Too Many Requests") {
		t.Errorf("AnswerError = %+v (%v)", e, e)
	}
}

// A client that owns no retries of its own sees the last answer without its Retry-After,
// so it cannot ask again on top of the policy.
func TestOwnsRetries(t *testing.T) {
	var tries atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	for _, owns := range []bool{false, true} {
		tries.Store(0)
		c := &http.Client{Transport: Transport(nil, Peer{Kind: "API server", Policy: quick, OwnsRetries: owns})}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Retry-After") != ""; got == owns || tries.Load() != int64(quick.Attempts) {
			t.Errorf("owns %v: Retry-After handed up %v after %d tries, want %v after %d", owns, got, tries.Load(), !owns, quick.Attempts)
		}
	}
}
