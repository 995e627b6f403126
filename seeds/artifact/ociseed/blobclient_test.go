package ociseed_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/registry"
)

// staticKeychain answers every registry with one login.
type staticKeychain struct{ user, pass string }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: k.user, Password: k.pass}, nil
}

// A push to a registry behind TLS and a login sends each missing blob in one PUT after the
// POST that opens its upload (no PATCH), and the seed pulls back whole, its chunks by plain
// GETs with the login's pull token; a wrong password is refused with the registry's answer
// and nothing is uploaded.
func TestPushToAuthenticatedTLSRegistry(t *testing.T) {
	r := registry.StartT(t, registry.Options{TLS: true, Username: "depot", Password: "s3cret"})
	src := t.TempDir()
	m := seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatChunked, seed.FormatRaw}})
	ref := r.Ref("seeds/demo:v1")
	ctx := context.Background()
	tls := ociseed.WithTransport(r.Transport())

	if _, err := ociseed.Push(ctx, src, ref, opts(tls, ociseed.WithKeychain(staticKeychain{"depot", "wrong"}))...); err == nil ||
		!strings.Contains(err.Error(), "UNAUTHORIZED") && !strings.Contains(err.Error(), "401") {
		t.Fatalf("push with a wrong password: %v", err)
	}
	if n := uploads(r.Requests()); n != 0 {
		t.Errorf("a refused login started %d uploads", n)
	}
	r.Reset()

	res, err := ociseed.Push(ctx, src, ref, opts(tls, ociseed.WithJobs(3), ociseed.WithKeychain(staticKeychain{"depot", "s3cret"}))...)
	if err != nil {
		t.Fatal(err)
	}
	puts, patches := 0, 0
	for _, q := range r.Requests() {
		switch {
		case q.Method == http.MethodPatch:
			patches++
		case q.Method == http.MethodPut && q.Kind() == "upload":
			puts++
		}
	}
	if n := uploads(r.Requests()); n != res.Blobs || puts != n || patches != 0 {
		t.Errorf("%d blobs: %d uploads opened, %d PUTs, %d PATCHes; want one POST and one PUT each", res.Blobs, n, puts, patches)
	}
	if res.Sent != res.Bytes {
		t.Errorf("sent %d of %d bytes", res.Sent, res.Bytes)
	}
	dst := filepath.Join(t.TempDir(), "pulled")
	r.Reset()
	if _, err := ociseed.Pull(ctx, ref, dst, opts(tls, ociseed.WithKeychain(staticKeychain{"depot", "s3cret"}))...); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, src, dst, m)
	if st := r.Stats(); st.BlobGets < 10 {
		t.Errorf("the pull fetched %d blobs", st.BlobGets)
	}
}
