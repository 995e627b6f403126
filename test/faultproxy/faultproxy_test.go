package faultproxy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/snofactory/snofactory/test/registry"
)

// fixture is a registry holding one image, and the URL of its first layer.
type fixture struct {
	reg     *registry.Registry
	img     v1.Image
	blobURL string // path part only
	blobLen int64
}

func newFixture(t *testing.T, layerSize int64) fixture {
	t.Helper()
	reg := registry.StartT(t, registry.Options{})
	img, err := random.Image(layerSize, 2)
	if err != nil {
		t.Fatal(err)
	}
	registry.PushT(t, reg.Ref("fp/img:v1"), img)
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	n, _ := layers[0].Size()
	return fixture{reg: reg, img: img, blobURL: "/v2/fp/img/blobs/" + d.String(), blobLen: n}
}

func startProxy(t *testing.T, target string, opts Options) *Proxy {
	t.Helper()
	p, err := Start(context.Background(), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestFaultKinds(t *testing.T) {
	f := newFixture(t, 256<<10)
	cases := []struct {
		kind  Kind
		check func(t *testing.T, resp *http.Response, err error, body []byte, readErr error, took time.Duration)
	}{
		{Reset, func(t *testing.T, resp *http.Response, err error, _ []byte, _ error, _ time.Duration) {
			if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(fmt.Sprint(err), "reset") {
				t.Fatalf("want connection reset, got resp=%v err=%v", resp, err)
			}
		}},
		{Error500, statusCheck(500, false)},
		{Error502, statusCheck(502, false)},
		{Error503, statusCheck(503, false)},
		{Error503RetryAfter, statusCheck(503, true)},
		{Error429RetryAfter, statusCheck(429, true)},
		{Truncate, func(t *testing.T, resp *http.Response, err error, body []byte, readErr error, _ time.Duration) {
			if err != nil {
				t.Fatalf("headers should arrive: %v", err)
			}
			if resp.ContentLength != f.blobLen {
				t.Fatalf("Content-Length %d, want the real %d", resp.ContentLength, f.blobLen)
			}
			if !errors.Is(readErr, io.ErrUnexpectedEOF) {
				t.Fatalf("read error %v, want unexpected EOF", readErr)
			}
			if int64(len(body)) != f.blobLen/2 {
				t.Fatalf("got %d body bytes, want half of %d", len(body), f.blobLen)
			}
		}},
		{ResetMidBody, func(t *testing.T, resp *http.Response, err error, body []byte, readErr error, _ time.Duration) {
			if err != nil {
				t.Fatalf("headers should arrive: %v", err)
			}
			if resp.ContentLength != f.blobLen {
				t.Fatalf("Content-Length %d, want the real %d", resp.ContentLength, f.blobLen)
			}
			t.Logf("read %d of %d bytes, then %v", len(body), f.blobLen, readErr)
			// Data in flight when the RST lands may be dropped, so only an
			// upper bound on what arrived holds.
			if readErr == nil || int64(len(body)) > f.blobLen/2 {
				t.Fatalf("read %d of %d bytes, err %v: want at most half and an error", len(body), f.blobLen, readErr)
			}
			if !errors.Is(readErr, syscall.ECONNRESET) && !errors.Is(readErr, io.ErrUnexpectedEOF) {
				t.Fatalf("read error %v, want connection reset", readErr)
			}
		}},
		{Slow, func(t *testing.T, resp *http.Response, err error, body []byte, readErr error, took time.Duration) {
			if err != nil || readErr != nil || int64(len(body)) != f.blobLen {
				t.Fatalf("slow must still deliver everything: err=%v readErr=%v len=%d", err, readErr, len(body))
			}
			t.Logf("256 KiB at 1 MiB/s took %s", took)
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			p := startProxy(t, f.reg.Addr(), Options{Rate: 1, Kinds: []Kind{tc.kind}, SlowBandwidth: 1 << 20, RetryAfter: 2 * time.Second})
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			start := time.Now()
			resp, err := client.Get(p.URL() + f.blobURL)
			var body []byte
			var readErr error
			if err == nil {
				body, readErr = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			tc.check(t, resp, err, body, readErr, time.Since(start))
			s := p.Stats()
			if s.Requests != 1 || s.Faults[tc.kind] != 1 || s.Total() != 1 {
				t.Fatalf("stats %+v, want one %s", s, tc.kind)
			}
			// Only a slow response is paced, and all of it: the limiter is what makes it slow.
			if want := map[bool]int64{true: f.blobLen}[tc.kind == Slow]; s.PacedBytes != want {
				t.Fatalf("%s: %d bytes paced, want %d", tc.kind, s.PacedBytes, want)
			}
		})
	}
}

func statusCheck(code int, retryAfter bool) func(*testing.T, *http.Response, error, []byte, error, time.Duration) {
	return func(t *testing.T, resp *http.Response, err error, _ []byte, _ error, _ time.Duration) {
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != code {
			t.Fatalf("status %d, want %d", resp.StatusCode, code)
		}
		if got := resp.Header.Get("Retry-After"); retryAfter != (got != "") || (retryAfter && got != "2") {
			t.Fatalf("Retry-After %q, want present=%v (2)", got, retryAfter)
		}
	}
}

func TestPassThroughAndBandwidth(t *testing.T) {
	f := newFixture(t, 128<<10)
	p := startProxy(t, f.reg.Addr(), Options{Bandwidth: 512 << 10})
	start := time.Now()
	ref, _ := name.ParseReference(p.Addr() + "/fp/img:v1")
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	for _, l := range layers {
		rc, err := l.Compressed() // verifies the digest while reading
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	took := time.Since(start)
	s := p.Stats()
	if s.Total() != 0 || s.Passed != s.Requests {
		t.Fatalf("faults without a rate: %+v", s)
	}
	// Every byte sent went through the link's limiter (two 128 KiB layers at 512 KiB/s).
	if s.PacedBytes != s.BytesOut {
		t.Fatalf("%d of %d bytes paced: the bandwidth limit did not apply to all of them (took %s)", s.PacedBytes, s.BytesOut, took)
	}
	if s.BytesOut < 2*(128<<10) {
		t.Fatalf("BytesOut %d, want >= both layers", s.BytesOut)
	}
}

func TestScheduleIsDeterministic(t *testing.T) {
	const n = 2000
	count := func(seed int64) (int, []string) {
		hits := 0
		var seq []string
		for i := 0; i < n; i++ {
			k, ok := decide(seed, 0.15, AllKinds, "GET", fmt.Sprintf("/v2/r/blobs/sha256:%d", i%97), i/97)
			if ok {
				hits++
			}
			seq = append(seq, string(k))
		}
		return hits, seq
	}
	h1, s1 := count(42)
	h2, s2 := count(42)
	_, s3 := count(43)
	if h1 != h2 || strings.Join(s1, ",") != strings.Join(s2, ",") {
		t.Fatal("same seed, different schedule")
	}
	if strings.Join(s1, ",") == strings.Join(s3, ",") {
		t.Fatal("different seeds, same schedule")
	}
	// 15% of 2000 = 300; allow sampling noise (sd ~16).
	if h1 < 240 || h1 > 360 {
		t.Fatalf("%d faults in %d requests at rate 0.15", h1, n)
	}
	kinds := map[string]bool{}
	for _, k := range s1 {
		kinds[k] = true
	}
	if len(kinds) != len(AllKinds)+1 { // every kind plus "" for no fault
		t.Fatalf("kinds used: %v", kinds)
	}
}

func seededImage(t *testing.T, seed int64, layers, size int) v1.Image {
	t.Helper()
	rnd := rand.New(rand.NewPCG(uint64(seed), 1))
	img := empty.Image
	for i := 0; i < layers; i++ {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		var err error
		img, err = mutate.AppendLayers(img, static.NewLayer(b, types.DockerLayer))
		if err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// A real client with retries survives a 15% fault rate on blob GETs, and the
// proxy reports the same faults for the same seed.
func TestClientSurvivesFaults(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	var imgs []v1.Image
	for i := 0; i < 4; i++ {
		// Fixed content, so the paths and therefore the schedule are the
		// same on every run.
		img := seededImage(t, int64(i), 4, 8<<10)
		registry.PushT(t, reg.Ref(fmt.Sprintf("fp/img%d:v1", i)), img)
		imgs = append(imgs, img)
	}
	run := func() Stats {
		p := startProxy(t, reg.Addr(), Options{
			Seed: 4, Rate: 0.15, Eligible: BlobGets, MaxFaultsPerPath: 2,
			Kinds: []Kind{Error500, Error502, Error503, Error503RetryAfter}, RetryAfter: time.Millisecond,
		})
		for i, want := range imgs {
			ref, _ := name.ParseReference(fmt.Sprintf("%s/fp/img%d:v1", p.Addr(), i))
			img, err := remote.Image(ref, remote.WithRetryBackoff(remote.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 4}))
			if err != nil {
				t.Fatal(err)
			}
			layers, _ := img.Layers()
			for _, l := range layers {
				rc, err := l.Compressed()
				if err != nil {
					t.Fatalf("image %d: %v", i, err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					t.Fatalf("image %d: %v", i, err)
				}
				rc.Close()
			}
			wd, _ := want.Digest()
			gd, _ := img.Digest()
			if wd != gd {
				t.Fatalf("digest %s, want %s", gd, wd)
			}
		}
		p.Close()
		return p.Stats()
	}
	a, b := run(), run()
	t.Logf("faults: %v over %d requests", a.Faults, a.Requests)
	// Seed 4 on this content gives a handful of faults; the test is
	// deterministic, so this never flakes.
	if a.Total() < 3 {
		t.Fatalf("no faults injected at rate 0.15: %+v", a)
	}
	if fmt.Sprint(a.Faults) != fmt.Sprint(b.Faults) {
		t.Fatalf("same seed, different faults: %v vs %v", a.Faults, b.Faults)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{{Rate: 1.5}, {Rate: -1}, {Kinds: []Kind{"explode"}}} {
		if _, err := Start(context.Background(), "127.0.0.1:1", o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
}

func TestContextCancelCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, "127.0.0.1:1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-p.Done()
	if resp, err := http.Get(p.URL() + "/v2/"); err == nil {
		resp.Body.Close()
		t.Fatal("proxy still answering after its context was cancelled")
	}
}

// Pushes go through the proxy too: upload URLs the registry hands out must
// point back at the proxy, not around it.
func TestPushThroughProxy(t *testing.T) {
	reg := registry.StartT(t, registry.Options{})
	p := startProxy(t, reg.Addr(), Options{})
	img := seededImage(t, 99, 2, 4<<10)
	registry.PushT(t, p.Addr()+"/fp/pushed:v1", img)
	reqs := reg.Requests()
	uploads := 0
	for _, q := range reqs {
		if q.Kind() == "upload" {
			uploads++
		}
	}
	if s := p.Stats(); uploads == 0 || s.Requests != len(reqs) {
		t.Fatalf("registry saw %d requests (%d uploads), the proxy %d: some went around it", len(reqs), uploads, s.Requests)
	}
	direct, _ := name.ParseReference(reg.Ref("fp/pushed:v1"))
	got, err := remote.Head(direct)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got.Digest != want {
		t.Fatalf("registry has %s, pushed %s", got.Digest, want)
	}
}

// TestHold holds a blob GET after half its body and an upload PUT after half of what it
// sends, until the test closes the gate: the client has exactly half of the blob while
// it is held, the connection drops once released, and the upload never reaches the
// registry.
func TestHold(t *testing.T) {
	f := newFixture(t, 256<<10)
	gate := make(chan struct{})
	held := make(chan string, 2)
	p := startProxy(t, f.reg.Addr(), Options{
		Hold: func(r *http.Request) <-chan struct{} {
			if r.Method == http.MethodPut || (r.Method == http.MethodGet && r.URL.Path == f.blobURL) {
				return gate
			}
			return nil
		},
		Held: func(r *http.Request) { held <- r.Method },
	})

	resp, err := http.Get(p.URL() + f.blobURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m := <-held; m != http.MethodGet {
		t.Fatalf("held %s, want the GET", m)
	}
	half := make([]byte, f.blobLen/2)
	if _, err := io.ReadFull(resp.Body, half); err != nil {
		t.Fatalf("reading the half let through: %v", err)
	}

	// The upload: a session opened past the proxy, its PUT sent through it.
	post, err := http.Post(p.URL()+"/v2/fp/held/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	loc, err := post.Location()
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 1<<20)
	q := loc.Query()
	q.Set("digest", "sha256:"+fmt.Sprintf("%x", sha256.Sum256([]byte(body))))
	loc.RawQuery = q.Encode()
	put, _ := http.NewRequest(http.MethodPut, loc.String(), strings.NewReader(body))
	putErr := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(put)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("status %s", resp.Status)
		}
		putErr <- err
	}()
	if m := <-held; m != http.MethodPut {
		t.Fatalf("held %s, want the PUT", m)
	}
	if s := p.Stats(); s.Held != 2 {
		t.Fatalf("Held %d, want 2", s.Held)
	}
	close(gate)
	if n, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Fatalf("the held GET completed after release (%d more bytes)", n)
	}
	if err := <-putErr; err == nil || strings.Contains(err.Error(), "status") {
		t.Fatalf("the held PUT: %v, want a dropped connection", err)
	}
	for _, q := range f.reg.Requests() {
		if q.Method == http.MethodPut && strings.HasPrefix(q.Path, "/v2/fp/held/") {
			t.Fatalf("the registry saw the held upload: %+v", q)
		}
	}
}
