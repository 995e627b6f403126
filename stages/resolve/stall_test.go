package resolve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/stages/internal/registries"
	pl "github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

// stallingRegistry stands in front of a test registry and stops answering the requests
// stall picks: it sends the first bytes of the answer, then nothing, holding the connection
// open until the client gives up (what a dead peer behind a live load balancer does). seen
// counts the stalled requests; onStall hears each.
func stallingRegistry(t *testing.T, backend string, stall func(*http.Request) bool, onStall func()) (addr string, seen *atomic.Int64) {
	t.Helper()
	seen = &atomic.Int64{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !stall(r) {
			rp.ServeHTTP(w, r)
			return
		}
		seen.Add(1)
		w.Header().Set("Content-Length", "1048576")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte{0x1f})
		w.(http.Flusher).Flush()
		if onStall != nil {
			onStall()
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), seen
}

// A registry that stops sending, inside a layer or before a manifest, fails the resolution
// once nothing moved for the stall timeout, naming the registry and the limit, and is not
// asked again; Ctrl-C still ends a resolution that waits on it.
func TestResolveStalledRegistry(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	rel, err := pl.Generate(context.Background(), reg.Addr(), pl.Options{Size: pl.Tiny, Components: 8})
	if err != nil {
		t.Fatal(err)
	}
	blobs := func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/blobs/") }
	manifests := func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/manifests/") }
	for _, tc := range []struct {
		name  string
		stall func(*http.Request) bool
		what  string
	}{
		{"inside a layer", blobs, "sent no more of the layer sha256:"},
		{"before the manifest", manifests, "sent no more of the manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, seen := stallingRegistry(t, reg.Addr(), tc.stall, nil)
			ctx := netlimit.WithStallTimeout(t.Context(), 300*time.Millisecond)
			_, err := Resolve(ctx, Options{Release: strings.Replace(rel.Tag, reg.Addr(), addr, 1),
				Registry: registries.Config{Insecure: []string{addr}}}, Runtime{OutDir: t.TempDir()})
			var se *netlimit.StallError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "registry "+addr+" "+tc.what) ||
				!strings.Contains(err.Error(), "stall timeout") {
				t.Fatalf("err = %v, want the stall of registry %s named", err, addr)
			}
			if seen.Load() != 1 {
				t.Errorf("the stalled request was made %d times, want once: a stall is not retried", seen.Load())
			}
		})
	}

	t.Run("Ctrl-C", func(t *testing.T) {
		ctx, cancel := context.WithCancel(netlimit.WithStallTimeout(t.Context(), time.Hour))
		defer cancel()
		addr, _ := stallingRegistry(t, reg.Addr(), blobs, cancel)
		_, err := Resolve(ctx, Options{Release: strings.Replace(rel.Tag, reg.Addr(), addr, 1),
			Registry: registries.Config{Insecure: []string{addr}}}, Runtime{OutDir: t.TempDir()})
		var se *netlimit.StallError
		if !errors.Is(err, context.Canceled) || errors.As(err, &se) {
			t.Errorf("err = %v, want the cancellation", err)
		}
	})
}
