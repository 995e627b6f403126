package validate

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/test/kubeapi"
)

// throttle answers every request 429 with Retry-After: 0.
func throttle(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Retry-After", "0")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
}

// reset resets the connection of every request, as a dying API server behind a load
// balancer does.
func reset(w http.ResponseWriter, _ *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn() // under TLS: no close_notify, which reads as a clean end
	}
	c.(*net.TCPConn).SetLinger(0) // close with a RST
	c.Close()
}

// An API server that throttles every request (429, Retry-After: 0) or resets every
// connection is asked as often as the one retry policy says, not that many times for each
// of client-go's own ten retries: client-go asks again after any 429 or 5xx with a
// Retry-After (client-go rest/with_retry.go, withRetry.IsNextRetry and checkWait) and, for a
// GET, after a reset connection (rest/request.go, Request.request, isErrRetryableFunc), up
// to maxRetries, 10 (rest/request.go, NewRequest).
func TestAPIRetriesAreTheOnePolicys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
		want    string
	}{
		{"throttled", throttle, apierrors.IsTooManyRequests, "429 Too Many Requests"},
		{"reset", reset, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "giving up after 5 tries: API server 127.0.0.1:")
		}, "API server ... reset the connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, asked := countingServer(t, tc.handler)
			dyn := dynamicFor(t, srv)
			_, err := dyn.Resource(gvrClusterVersion).Get(t.Context(), "version", metav1.GetOptions{})
			if !tc.check(err) {
				t.Errorf("err = %v, want %s", err, tc.want)
			}
			if want := int64(netlimit.DefaultPolicy().Attempts); asked.Load() != want {
				t.Errorf("the API server was asked %d times, want %d (the policy's tries, once)", asked.Load(), want)
			}
		})
	}
}

// dynamicFor is the API client of the checks, for srv.
func dynamicFor(t *testing.T, srv *httptest.Server) dynamic.Interface {
	t.Helper()
	cfg, err := RESTConfig(kubeconfigFor(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// An API server that resets every connection, or answers without end, is asked once for
// all the OpenShift checks, not once for each: the first check that gets no answer on any
// of the retry policy's tries, or an answer past its cap, marks the server down, and every
// check after it reports that error at once (each check's tries cost about four seconds of
// backoff; each endless answer a read of 64 MiB). The TLS handshake of the serving
// certificate's check is not an API request and still runs.
func TestUnreachableAPIAskedOnce(t *testing.T) {
	chunk := []byte(`{"kind":"List","items":[` + strings.Repeat(`{"kind":"Pod"},`, 4096))
	for _, tc := range []struct {
		name      string
		answer    func(http.ResponseWriter, *http.Request)
		want      []string
		wantAsked int64
	}{
		{"reset", reset, []string{"giving up after 5 tries: API server 127.0.0.1:", "reset the connection"},
			int64(netlimit.DefaultPolicy().Attempts)},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, []string{"API server 127.0.0.1:", "is larger than its cap of 64 MiB"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, asked := countingServer(t, tc.answer)
			run := openshiftChecks(t.Context(), Inputs{OpenShift: &OpenShift{Kubeconfig: kubeconfigFor(t, srv), DayTwoWorkers: true}})
			for _, id := range []string{CheckClusterVersion, CheckClusterOperators, CheckNodeReady, CheckEtcdEndpoints, CheckCSRNonePending,
				CheckTopology, CheckPoolUpdated, CheckIngressPinned} {
				if o := run(id); o.status != StatusError || !containsAll(o.message, tc.want) {
					t.Errorf("%s: %s %q, want the server's error naming %q", id, o.status, o.message, tc.want)
				}
			}
			if asked.Load() != tc.wantAsked {
				t.Errorf("the API server was asked %d times over the checks, want %d (once for all of them)", asked.Load(), tc.wantAsked)
			}
		})
	}
}

// countingServer is a TLS API server that answers with answer and counts the requests.
func countingServer(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	asked := new(atomic.Int64)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		answer(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	t.Cleanup(srv.Close)
	return srv, asked
}

func kubeconfigFor(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(kubeconfig, []byte(kubeapi.Kubeconfig(srv.URL, caPEM)), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
