package validate

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/test/kubeapi"
)

// An API server that throttles every request (429, Retry-After: 0) is asked as often as
// the one retry policy says, not that many times for each of client-go's own ten retries
// (client-go rest/with_retry.go, withRetry.IsNextRetry and checkWait: any 429 or 5xx with a
// Retry-After is asked again, up to maxRetries, 10, from rest/request.go, NewRequest).
func TestAPIRetriesAreTheOnePolicys(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(kubeconfig, []byte(kubeapi.Kubeconfig(srv.URL, caPEM)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(gvrClusterVersion).Get(t.Context(), "version", metav1.GetOptions{})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("err = %v, want the throttling answer", err)
	}
	if want := int64(netlimit.DefaultPolicy().Attempts); asked.Load() != want {
		t.Errorf("the API server was asked %d times, want %d (the policy's tries, once)", asked.Load(), want)
	}
}
