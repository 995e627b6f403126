package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/snofactory/snofactory/test/testbin"
)

func skopeo(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testbin.Require(t, "skopeo", "skopeo"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPushPull(t *testing.T) {
	cases := []struct {
		name string
		opts Options
	}{
		{"plain", Options{}},
		{"auth", Options{Username: "depot", Password: "s3cret"}},
		{"tls", Options{TLS: true}},
		{"tls+auth", Options{TLS: true, Username: "depot", Password: "s3cret"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := StartT(t, tc.opts)
			cpu0, err := r.CPU()
			if err != nil {
				t.Fatal(err)
			}
			img, err := random.Image(2048, 2)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := name.ParseReference(r.Ref("test/app:v1"))
			if err != nil {
				t.Fatal(err)
			}
			ropts := []remote.Option{remote.WithTransport(r.Transport())}
			if tc.opts.Username != "" {
				ropts = append(ropts, remote.WithAuth(&authn.Basic{Username: tc.opts.Username, Password: tc.opts.Password}))
			}
			if err := remote.Write(ref, img, ropts...); err != nil {
				t.Fatalf("push: %v", err)
			}
			want, _ := img.Digest()

			// skopeo is the independent client.
			args := []string{"inspect", "--format", "{{.Digest}}"}
			if tc.opts.TLS {
				args = append(args, "--cert-dir", r.CertDir())
			} else {
				args = append(args, "--tls-verify=false")
			}
			if tc.opts.Username != "" {
				args = append(args, "--creds", tc.opts.Username+":"+tc.opts.Password)
			}
			got := strings.TrimSpace(skopeo(t, append(args, "docker://"+r.Ref("test/app:v1"))...))
			if got != want.String() {
				t.Fatalf("skopeo sees %s, pushed %s", got, want)
			}
			// Serving requests takes the registry process CPU time, which /proc counts in
			// 10 ms steps: requests until the count moves, never more than it can take.
			client := &http.Client{Transport: r.Transport()}
			cpu1 := cpu0
			for i := 0; i < 20000 && cpu1 == cpu0; i++ {
				resp, err := client.Head(r.URL() + "/v2/test/app/blobs/" + want.String())
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if i%100 == 0 {
					if cpu1, err = r.CPU(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if cpu1 <= cpu0 {
				t.Errorf("registry CPU %v before, %v after a push and thousands of requests", cpu0, cpu1)
			}

			if tc.opts.Username != "" {
				resp, err := (&http.Client{Transport: r.Transport()}).Get(r.URL() + "/v2/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("anonymous /v2/ = %d, want 401", resp.StatusCode)
				}
			}
		})
	}
}

func TestStatsCountBlobGets(t *testing.T) {
	r := StartT(t, Options{})
	img, err := random.Image(4096, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(r.Ref("stats/img:v1"))
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.Pushes == 0 || s.BlobGets != 0 {
		t.Fatalf("after push: %+v, want pushes and no blob GETs", s)
	}
	r.Reset()
	if s := r.Stats(); s.Total != 0 {
		t.Fatalf("after reset: %+v", s)
	}

	// A manifest-only look must not fetch layer blobs.
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Stats(); s.BlobGets != 0 || s.ManifestHeads != 1 {
		t.Fatalf("after HEAD: %+v", s)
	}

	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := pulled.Layers()
	var want int64
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		n, err := ioCopyDiscard(rc)
		if err != nil {
			t.Fatal(err)
		}
		want += n
	}
	cfg, _ := pulled.RawConfigFile() // one more blob GET
	want += int64(len(cfg))
	s := r.Stats()
	if s.BlobGets != len(layers)+1 || s.BlobGetBytes != want {
		t.Fatalf("stats %+v, want %d blob GETs of %d bytes (manifest %s)", s, len(layers)+1, want, desc.Digest)
	}
	for _, q := range r.Requests() {
		if strings.HasPrefix(q.Path, syncPrefix) {
			t.Fatalf("sync probe leaked into requests: %+v", q)
		}
	}
}

func TestStopKillsAndCleans(t *testing.T) {
	r, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := r.cmd.Process.Pid
	dir := r.dir
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("registry pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("storage %s left behind: %v", dir, err)
	}
}

func TestContextCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	cancel()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("registry still running 10s after its context was cancelled")
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := Start(context.Background(), Options{Binary: "/nonexistent/docker-registry"})
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), AptPackage) {
		t.Fatalf("err = %v, want ErrNotInstalled naming %s", err, AptPackage)
	}
}

func TestParallelRegistriesGetDistinctPorts(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		r := StartT(t, Options{})
		if seen[r.Addr()] {
			t.Fatalf("port reused: %s", r.Addr())
		}
		seen[r.Addr()] = true
	}
	if len(seen) != 3 {
		t.Fatal(fmt.Sprint(seen))
	}
}
