package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/flock"
	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the real binary, built the first time a test starts it.
var snofactoryBin testbin.LazyBinary

func TestMain(m *testing.M) {
	code := m.Run()
	snofactoryBin.Remove()
	os.Exit(code)
}

// blocked is one command held in a state where only Ctrl-C ends it.
type blocked struct {
	name string
	// start prepares the command's world and returns its arguments, what the child's stdin
	// is (nil: none) and the event that shows the child is blocked.
	start func(t *testing.T) (args []string, stdin io.Reader, blocked func(ctx context.Context, c *testbin.Child) error)
	// outputs must not exist after the interrupted command.
	outputs func() []string
	// stdout is what the command says on stdout, "" for nothing.
	stdout string
}

// TestCtrlCEndsEveryBlockedCommand holds each command where it waits on something that
// never comes (a registry or API that never answers, a lock another build holds, a source
// that stops mid-write, stdin that never ends), then sends SIGINT, as a supervisor's kill
// does, to the command alone: it must exit 130 saying it was interrupted, having stopped
// everything it started and left no temporary or partial file. Time is bounded by the
// test's contexts only: a guard for reaching the blocked state, and a short one of its own
// for the exit after SIGINT.
func TestCtrlCEndsEveryBlockedCommand(t *testing.T) {
	for _, tc := range blockedCommands(t) {
		t.Run(tc.name, func(t *testing.T) {
			// A guard against a hang, not a figure: a command that ignores SIGINT is killed
			// and fails here instead of holding the suite until go test's own timeout.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			args, stdin, isBlocked := tc.start(t)
			tmp := t.TempDir()
			c := testbin.StartChild(t, snofactoryBin.Path(t), args, func(cmd *exec.Cmd) {
				cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
				cmd.Stdin = stdin
			})
			if err := isBlocked(ctx, c); err != nil {
				t.Fatalf("never blocked: %v; stderr: %s", err, c.Stderr)
			}
			// The memory bound is in force in the command itself, not only in its launcher.
			limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", c.Cmd.Process.Pid))
			if want := fmt.Sprintf("Max data size             %d", testbin.ChildMemory); !strings.Contains(string(limits), want) {
				t.Errorf("the command runs without its memory limit (%q):\n%s", want, limits)
			}
			if err := c.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			// Ctrl-C must end the command promptly, not whenever the guard above runs out:
			// the wait for its exit has its own short context, which kills it and fails the
			// test when it ends first (a bound generous enough for a loaded machine, not a
			// figure).
			prompt, cancelPrompt := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancelPrompt()
			code := c.Wait(prompt, t)
			stderr := c.Stderr.String()
			if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
				t.Errorf("exit %d, stderr %q; want %d and a message saying it was interrupted", code, stderr, exitInterrupted)
			}
			if left := c.Leftovers(); len(left) > 0 {
				t.Errorf("processes left running: %v", left)
			}
			if out := c.Stdout.String(); tc.stdout == "" && out != "" || !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q; an interrupted command reports no result (want %q)", out, tc.stdout)
			}
			// What an interrupted transfer keeps to resume from is named in the message;
			// nothing else may be left.
			left, _ := os.ReadDir(tmp)
			for _, e := range left {
				if !strings.Contains(stderr, filepath.Join(tmp, e.Name())) {
					t.Errorf("temporary file left and not named: %s", e.Name())
				}
			}
			for _, p := range tc.outputs() {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("partial output left: %s", p)
				}
			}
		})
	}
}

func blockedCommands(t *testing.T) []blocked {
	out := filepath.Join(t.TempDir(), "out")
	target := filepath.Join(t.TempDir(), "disk.img")
	none := func() []string { return nil }
	outs := func() []string { return []string{out, target} }
	registry := func(cmd ...string) func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
		return func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			held := silentServer(t)
			ref := strings.TrimPrefix(held.url, "http://") + "/seeds/demo:1"
			args := append(append([]string{}, cmd...), seedTrustFlags(t)...)
			args = append(args, ref)
			if cmd[1] == "pull" {
				args = append(args, out)
			}
			return args, nil, held.entered
		}
	}
	return []blocked{
		{"seed pull from a registry that never answers", registry("seed", "pull"), outs, ""},
		{"seed inspect of a registry that never answers", registry("seed", "inspect"), none, ""},
		{"seed verify REF of a registry that never answers", registry("seed", "verify"), none, ""},
		{"seed push to a registry that never answers", func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			held := silentServer(t)
			ref := strings.TrimPrefix(held.url, "http://") + "/seeds/demo:1"
			return []string{"seed", "push", hostileSeed(t, nil), ref}, nil, held.entered
		}, none, ""},
		{"seed write from a source that stops mid-write", seedWriteHeld(target), outs, ""},
		{"release info of a registry that never answers", func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			held := silentServer(t)
			host := strings.TrimPrefix(held.url, "http://")
			// With an auth file, so the check of what is left in TMPDIR covers its private
			// copy too.
			auth := filepath.Join(t.TempDir(), "auth.json")
			os.WriteFile(auth, []byte(`{"auths":{}}`), 0o600)
			return []string{"release", "info", "--authfile", auth, "--insecure-registry", host, host + "/ocp/release:4.16"}, nil, held.entered
		}, none, ""},
		{"cluster check of an API that never answers", func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			held := silentServer(t)
			return []string{"cluster", "check", "--kubeconfig", kubeconfigFor(t, held.url)}, nil, held.entered
		}, none, ""},
		{"cluster check --wait on an API that is never ready", func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			again := unreadyServer(t)
			return []string{"cluster", "check", "--wait", "1h", "--kubeconfig", kubeconfigFor(t, again.url)}, nil, again.entered
		}, none, ""},
		{"build waiting for a lock another build holds", lockHeld("build"), none, ""},
		{"depot run waiting for a lock another build holds", lockHeld("depot"), none, "depot interrupted: 0 succeeded, 0 failed"},
		{"iso embed reading an Ignition config from stdin that never ends", func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
			iso := filepath.Join(t.TempDir(), "live.iso")
			os.WriteFile(iso, []byte("not read before the config"), 0o644)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			return []string{"iso", "embed", "-i", "-", "-o", out, iso}, r, func(ctx context.Context, _ *testbin.Child) error {
				// A pipe holds 64 KiB: once a write of four times that returns, the
				// command has read at least the rest, and waits for more.
				stop := context.AfterFunc(ctx, func() { w.SetWriteDeadline(time.Now()) })
				defer stop()
				_, err := w.Write(bytes.Repeat([]byte(" "), 256<<10))
				return err
			}
		}, outs, ""},
	}
}

// silent is a server that takes every request and never answers it: the peer of a
// connection that hangs. entered is the event of its first request arriving.
type silent struct {
	url  string
	reqs chan string
}

func (s silent) entered(ctx context.Context, _ *testbin.Child) error {
	select {
	case <-s.reqs:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func silentServer(t *testing.T) silent {
	s := silent{reqs: make(chan string, 100)}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.reqs <- r.URL.Path:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	s.url = srv.URL
	return s
}

// unreadyServer is an API server that answers every request at once with 503, as a
// starting kube-apiserver does before it serves: the client waits between its tries and
// polls, not on a connection. The event is a request for a path asked before, which shows
// the command came back after a wait.
func unreadyServer(t *testing.T) silent {
	s := silent{reqs: make(chan string, 1)}
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if seen[r.URL.Path] {
			select {
			case s.reqs <- r.URL.Path:
			default:
			}
		}
		seen[r.URL.Path] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// seedTrustFlags is a policy that accepts any seed and no registries.d: what is tested is
// the transfer, not the trust decision.
func seedTrustFlags(t *testing.T) []string {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644)
	regd := filepath.Join(dir, "registries.d")
	os.Mkdir(regd, 0o755)
	return []string{"--policy", policy, "--registries.d", regd}
}

// kubeconfigFor reaches the API server at url without credentials.
func kubeconfigFor(t *testing.T, url string) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(p, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
users:
- name: u
  user:
    token: not-a-secret
`, url), 0o600)
	return p
}

// lockHeld starts a build (or a depot of one blueprint) whose first stage's cache entry
// this test holds locked, as another build making the same entry would; the command says it
// waits.
func lockHeld(how string) func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
	return func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
		bp, err := testbin.CopyDemo(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		cache, outDir := t.TempDir(), t.TempDir()
		code, stdout, stderr := runMain(t, "plan", bp, "-o", "json", "--cache-dir", cache, "--until", "render")
		var plan struct{ Stages []struct{ Name, Key string } }
		if err := json.Unmarshal([]byte(stdout), &plan); code != 0 || err != nil || len(plan.Stages) == 0 {
			t.Fatalf("plan: exit %d, %v: %s", code, err, stderr)
		}
		os.MkdirAll(filepath.Join(cache, "locks"), 0o755)
		lock, err := os.OpenFile(filepath.Join(cache, "locks", plan.Stages[0].Key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lock.Close() })
		if ok, err := flock.TryLock(lock); !ok {
			t.Fatalf("taking the lock: %v", err)
		}
		args := []string{"build", bp, "--progress", "plain", "--until", "render", "--cache-dir", cache, "--output-dir", outDir}
		if how == "depot" {
			args = []string{"depot", "run", bp, "--until", "render", "--cache-dir", cache, "--output-dir", outDir}
		}
		return args, nil, func(ctx context.Context, c *testbin.Child) error {
			return c.Stderr.WaitFor(ctx, pipeline.WaitingForEntry)
		}
	}
}

// seedWriteHeld writes a seed from a registry that serves its manifest and holds its last
// chunk: the write has begun and its source stops, as a peer that dies mid-transfer.
func seedWriteHeld(target string) func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
	return func(t *testing.T) ([]string, io.Reader, func(context.Context, *testbin.Child) error) {
		layout := filepath.Join(t.TempDir(), "layout")
		if code, _, stderr := runMain(t, "seed", "push", hostileSeed(t, nil), "oci:"+layout+":v1"); code != 0 {
			t.Fatalf("push: exit %d: %s", code, stderr)
		}
		held := layoutRegistry(t, layout)
		ref := strings.TrimPrefix(held.url, "http://") + "/seeds/demo:v1"
		args := append([]string{"seed", "write", "--jobs", "1", "--image", ref, "--device", target}, seedTrustFlags(t)...)
		return args, nil, held.entered
	}
}

// layoutRegistry serves an OCI layout as a registry (the distribution API's GETs, enough
// for a client that pulls) and never answers the request for the manifest's last chunk.
func layoutRegistry(t *testing.T, layout string) silent {
	s := silent{reqs: make(chan string, 1)}
	var index struct{ Manifests []struct{ Digest string } }
	b, _ := os.ReadFile(filepath.Join(layout, "index.json"))
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	top := index.Manifests[0].Digest
	blob := func(d string) ([]byte, error) {
		return os.ReadFile(filepath.Join(layout, "blobs", strings.Replace(d, ":", "/", 1)))
	}
	var m struct {
		MediaType string
		Layers    []struct{ MediaType, Digest string }
	}
	b, _ = blob(top)
	json.Unmarshal(b, &m)
	hold := ""
	for _, l := range m.Layers {
		if strings.Contains(l.MediaType, "chunk") {
			hold = l.Digest
		}
	}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/")
		last := parts[len(parts)-1]
		switch {
		case r.URL.Path == "/v2/":
			return
		case len(parts) > 2 && parts[len(parts)-2] == "manifests" && (last == "v1" || last == top):
			w.Header().Set("Content-Type", m.MediaType)
			w.Header().Set("Docker-Content-Digest", top)
			last = top
		case len(parts) > 2 && parts[len(parts)-2] == "blobs" && last == hold:
			s.reqs <- last
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		case len(parts) > 2 && parts[len(parts)-2] == "blobs":
		default:
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		b, err := blob(last)
		if err != nil {
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		if r.Method != http.MethodHead {
			w.Write(b)
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	s.url = srv.URL
	return s
}
