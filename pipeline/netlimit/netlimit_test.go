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
