package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/test/faultproxy"
	"github.com/snofactory/snofactory/test/kubeapi"
	"github.com/snofactory/snofactory/test/registry"
)

// stall is the stall timeout the tests of a silent or dripping peer set: small, so a dead
// peer is found quickly. No test measures it; each waits for the failure the timeout
// causes. The tests of an endless answer keep a long one (noStall), which a loaded machine
// cannot reach between two reads.
const (
	stall   = "200ms"
	noStall = "1h"
)

// hostileRegistry answers the /v2/ ping like a registry, then mistreats every manifest
// request as mode says: "endless" sends a manifest without end, "drip" sends one byte and
// then nothing more.
func hostileRegistry(t *testing.T, mode string) string {
	t.Helper()
	chunk := []byte(`{"schemaVersion":2,"layers":[` + strings.Repeat(`{"size":1},`, 4096))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
		switch mode {
		case "endless":
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "drip":
			w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the next byte never comes; the client hangs up
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// silentPeer accepts connections and never answers, nor reads.
func silentPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
			close(done)
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// acceptAnything is a trust policy that reads nothing from the registry, so what is tested
// is the seed commands' own client.
func acceptAnything(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A registry that sends an endless manifest, drips it, or never answers fails seed pull,
// seed inspect and seed verify REF with exit 1, a message naming the registry and the
// limit, and nothing left behind.
func TestSeedCommandsAgainstHostileRegistries(t *testing.T) {
	policy := acceptAnything(t)
	for _, tc := range []struct{ name, host, want, stall string }{
		{"endless manifest", hostileRegistry(t, "endless"), "is larger than its cap of 4 MiB", noStall},
		{"dripping manifest", hostileRegistry(t, "drip"), "sent no more of the manifest for 200ms (stall timeout; change it with --stall-timeout)", stall},
		{"silent registry", silentPeer(t), "answered nothing for 200ms (stall timeout; change it with --stall-timeout)", stall},
	} {
		ref := tc.host + "/seeds/demo:v1"
		for _, args := range [][]string{
			{"seed", "pull", ref, "DIR"},
			{"seed", "inspect", ref},
			{"seed", "verify", ref},
		} {
			t.Run(tc.name+"/"+args[1], func(t *testing.T) {
				tmp := t.TempDir()
				t.Setenv("TMPDIR", tmp) // where seed verify REF stages its pull
				t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
				t.Setenv("DOCKER_CONFIG", t.TempDir())
				dir := filepath.Join(t.TempDir(), "pulled")
				if args[len(args)-1] == "DIR" {
					args = append(args[:len(args)-1:len(args)-1], dir)
				}
				args = append(args, "--stall-timeout", tc.stall, "--policy", policy)
				code, stdout, stderr := runMain(t, args...)
				if code != 1 || !strings.Contains(stderr, "registry "+tc.host) || !strings.Contains(stderr, tc.want) {
					t.Errorf("exit %d, stderr %q: want exit 1 naming registry %s and %q", code, stderr, tc.host, tc.want)
				}
				if stdout != "" {
					t.Errorf("stdout %q, want nothing", stdout)
				}
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("the pull left %s behind (%v)", dir, err)
				}
				if left, _ := os.ReadDir(tmp); len(left) != 0 {
					t.Errorf("left in $TMPDIR: %v", left)
				}
			})
		}
	}
}

// A registry that answers a chunk blob GET once with a transient fault (a 500, a body cut
// short, a reset mid-body) and then with the right bytes: the pull succeeds, and the proxy
// counted the faults. One 500 on one of thousands of chunks used to fail the pull, because
// chunk blobs went through a client that retried no status code.
func TestSeedPullRetriesChunkBlobs(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 2 << 20, Seed: 9})
	if code, _, stderr := runMain(t, "seed", "push", "--chunk-size", "512KiB", src, r.Ref("seeds/flaky:v1")); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	policy := acceptAnything(t)
	for _, kind := range []faultproxy.Kind{faultproxy.Error500, faultproxy.Truncate, faultproxy.ResetMidBody} {
		t.Run(string(kind), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p, err := faultproxy.Start(ctx, r.Addr(), faultproxy.Options{Rate: 1, Kinds: []faultproxy.Kind{kind},
				Eligible: faultproxy.BlobGets, MaxFaultsPerPath: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			dir := filepath.Join(t.TempDir(), "pulled")
			code, stdout, stderr := runMain(t, "seed", "pull", "--policy", policy, p.Addr()+"/seeds/flaky:v1", dir)
			if code != 0 || !strings.Contains(stdout, "Pulled seed") {
				t.Fatalf("pull through one %s per blob: exit %d\n%s\n%s", kind, code, stdout, stderr)
			}
			if st := p.Stats(); st.Faults[kind] == 0 {
				t.Errorf("the proxy injected no %s: %+v", kind, st)
			}
		})
	}
}

// An API server that never answers, or sends an endless answer, fails cluster check's
// checks naming the server and the limit, in bounded time and memory: exit 1.
func TestClusterCheckAgainstHostileAPIServer(t *testing.T) {
	for _, tc := range []struct{ name, want, stall string }{
		{"silent", "answered nothing for 200ms (stall timeout", stall},
		{"endless", "is larger than its cap of 64 MiB", noStall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunk := []byte(`{"kind":"List","items":[` + strings.Repeat(`{"kind":"Pod"},`, 4096))
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.name == "silent" {
					<-r.Context().Done()
					return
				}
				w.Header().Set("Content-Type", "application/json")
				for r.Context().Err() == nil {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kc, []byte(kubeapi.Kubeconfig(srv.URL, ca)), 0o600); err != nil {
				t.Fatal(err)
			}
			host := strings.TrimPrefix(srv.URL, "https://")
			code, stdout, stderr := runMain(t, "cluster", "check", "--kubeconfig", kc, "--stall-timeout", tc.stall)
			if code != 1 || !strings.Contains(stdout+stderr, "API server "+host) || !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("exit %d: want 1 naming API server %s and %q\nstdout:\n%s\nstderr:\n%s", code, host, tc.want, stdout, stderr)
			}
		})
	}
}

// A policy that requires signatures makes containers/image read the seed and its
// signatures before our client does; a registry that drips or never answers then fails
// the check within the stall timeout, naming the registry, not as an untrusted seed.
func TestSignatureCheckAgainstHostileRegistries(t *testing.T) {
	key := trusttest.New(t, "depot")
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, fmt.Appendf(nil, `{"default":[{"type":"sigstoreSigned","keyPath":%q}]}`, key.PubFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, host string }{
		{"dripping manifest", hostileRegistry(t, "drip")},
		{"silent registry", silentPeer(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
			t.Setenv("DOCKER_CONFIG", t.TempDir())
			dir := filepath.Join(t.TempDir(), "pulled")
			code, _, stderr := runMain(t, "seed", "pull", tc.host+"/seeds/demo:v1", dir, "--stall-timeout", stall,
				"--policy", policy, "--registries.d", t.TempDir())
			want := "registry " + tc.host + " sent no more of the answers the signature check reads for 200ms (stall timeout"
			if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "not trusted") {
				t.Errorf("exit %d, stderr %q: want exit 1 and %q", code, stderr, want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the pull left %s behind (%v)", dir, err)
			}
		})
	}
}
