package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/netlimit"
)

func content(n int) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// flakyServer serves data with Range support; the first `cut` responses stop after half of
// what they promised, like a connection dropped mid-transfer.
func flakyServer(t *testing.T, data []byte, cut int32) (*httptest.Server, *atomic.Int32, *atomic.Int64) {
	var calls atomic.Int32
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		start := 0
		if rg := r.Header.Get("Range"); rg != "" {
			fmt.Sscanf(rg, "bytes=%d-", &start)
			if start >= len(data) {
				w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				return
			}
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(len(data)-start))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		}
		body := data[start:]
		if n <= cut {
			body = body[:len(body)/2]
		}
		w.Write(body)
		served.Add(int64(len(body)))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &served
}

func TestResumesAfterTruncatedBodies(t *testing.T) {
	data, sum := content(1 << 20)
	srv, calls, served := flakyServer(t, data, 2)
	store := t.TempDir()
	var lastDone int64
	p, err := File(context.Background(), srv.URL+"/live.iso", sum, store, Options{Retry: netlimit.Policy{Backoff: time.Millisecond}, Progress: func(d, _ int64) { lastDone = d }})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != string(data) || p != Path(store, sum) {
		t.Fatal("stored content differs")
	}
	if calls.Load() != 3 {
		t.Errorf("calls = %d, want 3 (two cut, one resumed)", calls.Load())
	}
	// Resuming means each byte crossed the wire about once, not three times.
	if s := served.Load(); s > int64(len(data)) {
		t.Errorf("served %d bytes for a %d-byte file: ranges were not used", s, len(data))
	}
	if lastDone != int64(len(data)) {
		t.Errorf("progress ended at %d", lastDone)
	}
	// A second fetch is served from the store.
	if _, err := File(context.Background(), srv.URL+"/live.iso", sum, store, Options{}); err != nil || calls.Load() != 3 {
		t.Fatalf("second fetch hit the server: calls=%d err=%v", calls.Load(), err)
	}
}

func TestWrongChecksumNeverEntersStore(t *testing.T) {
	data, _ := content(4096)
	srv, _, _ := flakyServer(t, data, 0)
	store := t.TempDir()
	wrong := strings.Repeat("ab", 32)
	_, err := File(context.Background(), srv.URL+"/x.iso", wrong, store, Options{})
	if err == nil || !strings.Contains(err.Error(), "want "+wrong) {
		t.Fatalf("got %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(store, "sha256", "*")); len(left) != 0 {
		t.Fatalf("store holds %v", left)
	}
}

func TestErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, sum := content(10)
	for _, tt := range []struct{ url, sha, want string }{
		{srv.URL + "/missing.iso", sum, "404"},
		{"ftp://host/x.iso", sum, "unsupported scheme"},
		{"file:///nonexistent/x.iso", sum, "no such file"},
		{srv.URL + "/x.iso", "XYZ", "not 64 lowercase hex"},
	} {
		if _, err := File(context.Background(), tt.url, tt.sha, t.TempDir(), Options{Retry: netlimit.Policy{Attempts: 2, Backoff: time.Millisecond}}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.url, err, tt.want)
		}
	}
}

func TestFileURL(t *testing.T) {
	data, sum := content(8192)
	src := filepath.Join(t.TempDir(), "local.iso")
	os.WriteFile(src, data, 0o644)
	p, err := File(context.Background(), "file://"+src, sum, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(data) {
		t.Fatal("content differs")
	}
}

// Builds sharing a store may ask for the same ISO at once: it is fetched once, and all get it.
func TestConcurrentFetchesOfOneFile(t *testing.T) {
	data, sum := content(1 << 20)
	srv, calls, _ := flakyServer(t, data, 0)
	store := t.TempDir()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			p, err := File(context.Background(), srv.URL+"/live.iso", sum, store, Options{})
			if err == nil {
				if got, _ := os.ReadFile(p); string(got) != string(data) {
					err = fmt.Errorf("content differs")
				}
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("fetched %d times", calls.Load())
	}
}

// A process killed mid-download leaves its partial file in the store; the next fetch asks
// only for the rest.
func TestResumesPartialOfKilledRun(t *testing.T) {
	data, sum := content(1 << 20)
	srv, calls, served := flakyServer(t, data, 0)
	store := t.TempDir()
	st, err := blobstore.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := st.Acquire(context.Background(), digest.NewDigestFromEncoded(digest.SHA256, sum))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[:3<<18])
	w.Release()
	p, err := File(context.Background(), srv.URL+"/live.iso", sum, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != string(data) {
		t.Fatal("stored content differs")
	}
	if calls.Load() != 1 || served.Load() != int64(len(data)-3<<18) {
		t.Errorf("%d calls served %d bytes, want one for the last %d", calls.Load(), served.Load(), len(data)-3<<18)
	}
	if left, _ := filepath.Glob(filepath.Join(store, "partial", "*")); len(left) != 0 {
		t.Errorf("partial files left: %v", left)
	}
}

// A server that answers 503 with Retry-After: 1 is asked again after that second, not after
// the policy's own backoff: with a backoff of an hour, bounded by the policy's 30 s at most
// and jittered to no less than half of that, only the Retry-After lets the fetch end before
// the test's context of 10 s does.
func TestRetryAfterIsHonoured(t *testing.T) {
	data, sum := content(64 << 10)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	// The waits are recorded, not spent: an hour's backoff shows whether the peer's one
	// second was taken instead.
	var waits []time.Duration
	pol := netlimit.Policy{Backoff: time.Hour, MaxWait: time.Hour, Sleep: func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}}
	if _, err := File(context.Background(), srv.URL+"/live.iso", sum, t.TempDir(), Options{Retry: pol}); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(waits) != 1 || waits[0] != time.Second {
		t.Errorf("waits = %v, want the Retry-After's one second", waits)
	}
	if calls.Load() != 2 {
		t.Errorf("calls = %d, want 2 (a 503, then the file)", calls.Load())
	}
}
