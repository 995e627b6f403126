package ociseed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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

// A first push costs a missing blob two requests, the POST that opens its upload and the
// PUT that sends it: no HEAD before each, which a first push always answers 404 (one HEAD
// in all, for the blob that proves the registry mounts).
func TestPushAsksOnceABlob(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatChunked, seed.FormatRaw}})
	res, err := ociseed.Push(context.Background(), src, r.Ref("seeds/demo:v1"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	reqs := r.Requests()
	puts := 0
	for _, q := range reqs {
		if q.Method == http.MethodPut && q.Kind() == "upload" {
			puts++
		}
	}
	st := registry.Summarize(reqs)
	if n, m := uploads(reqs), posts(reqs, http.StatusCreated); n != res.Blobs || puts != n || m != 1 || st.BlobHeads != 1 {
		t.Errorf("%d blobs: %d uploads, %d PUTs, %d mounts, %d HEADs; want %d, %d, 1 and 1",
			res.Blobs, n, puts, m, st.BlobHeads, res.Blobs, res.Blobs)
	}
}

// A registry that does not mount answers every POST with an upload session, also for a
// blob it has (the distribution spec lets it: "Mounting a blob from another repository",
// a registry unable to mount SHOULD answer 202), or refuses the mount's POST as an
// operation it does not support (the spec's error code UNSUPPORTED, 405). The push finds
// that out on its first blob and HEADs every other one, so an unchanged seed pushed to a
// new tag still sends nothing.
func TestPushToRegistryThatDoesNotMount(t *testing.T) {
	for _, tc := range []struct {
		name string
		// refuse answers a mount's POST with 405 UNSUPPORTED; else it is opened as a
		// plain upload.
		refuse bool
		// uploads the re-push opens: the probe's, which it cancels, on a registry that
		// answers 202.
		uploads int
	}{
		{name: "answers 202", uploads: 1},
		{name: "refuses the mount", refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := registry.StartT(t, registry.Options{})
			host := noMountProxy(t, r, tc.refuse)
			src := t.TempDir()
			seedtest.Write(t, src, seedtest.Options{Formats: []string{seed.FormatQCOW2, seed.FormatRaw}})
			ctx := context.Background()
			if _, err := ociseed.Push(ctx, src, host+"/seeds/demo:v1", opts()...); err != nil {
				t.Fatal(err)
			}
			r.Reset()
			again, err := ociseed.Push(ctx, src, host+"/seeds/demo:v2", opts()...)
			if err != nil {
				t.Fatal(err)
			}
			reqs := r.Requests()
			if n, st := uploads(reqs), registry.Summarize(reqs); again.Sent != 0 || n != tc.uploads || st.BlobHeads != again.Blobs {
				t.Errorf("re-push of %d blobs sent %d bytes, opened %d uploads and made %d HEADs; want 0, %d and %d",
					again.Blobs, again.Sent, n, st.BlobHeads, tc.uploads, again.Blobs)
			}
		})
	}
}

// noMountProxy serves r behind a proxy that either drops a POST's mount (distribution then
// opens an upload: registry/handlers/blobupload.go, StartBlobUpload mounts only given mount
// and from) or, with refuse, answers it 405 UNSUPPORTED itself, and returns its host:port.
func noMountProxy(t *testing.T, r *registry.Registry, refuse bool) string {
	target, err := url.Parse(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	direct := proxy.Director
	proxy.Director = func(q *http.Request) {
		direct(q)
		v := q.URL.Query()
		v.Del("mount")
		v.Del("from")
		q.URL.RawQuery = v.Encode()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if refuse && q.Method == http.MethodPost && q.URL.Query().Has("mount") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			w.Write([]byte(`{"errors":[{"code":"UNSUPPORTED","message":"the operation is unsupported"}]}`))
			return
		}
		proxy.ServeHTTP(w, q)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
