package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline"
)

// AptPackage is the Debian package that provides the registry binary.
const AptPackage = "docker-registry"

// DefaultBinary is where the Debian package installs the registry.
const DefaultBinary = "/usr/bin/docker-registry"

// ErrNotInstalled reports that no registry binary was found.
var ErrNotInstalled = errors.New("docker-registry binary not found (install the Debian package " + AptPackage + "; `make deps` does)")

// Options configure a registry. The zero value is a plain-HTTP registry
// without auth.
type Options struct {
	// Binary is the registry executable. Empty means docker-registry on
	// PATH, then DefaultBinary.
	Binary string
	// Username and Password, when both set, turn on htpasswd basic auth.
	Username string
	Password string
	// TLS serves HTTPS with a generated self-signed certificate valid for
	// 127.0.0.1, ::1 and localhost.
	TLS bool
	// Port, when not 0, is the port to listen on (127.0.0.1:Port) instead of a free one, for
	// programs that name the registry in a file written beforehand (the demo blueprint).
	Port int
	// Host is the IPv4 address to listen on instead of 127.0.0.1: a test bridge's own
	// address, for clients in network namespaces that reach only that bridge (test/kube's
	// pods). Clients treat such a private address as plain HTTP, as they do 127.0.0.1.
	Host string
	// StartTimeout bounds the wait for /v2/ to answer. Default 20s.
	StartTimeout time.Duration
	// Logger receives lifecycle messages. Nil discards them.
	Logger *slog.Logger
}

// Registry is a running registry process.
type Registry struct {
	opts Options
	addr string
	dir  string // everything the registry owns: config, storage, certs
	// owner holds the lock of dir (pipeline.OwnedTempDir) while this process owns the
	// registry, so a later start reaps dir only once this process is gone.
	owner   *os.File
	certDir string
	caPool  *x509.CertPool

	cmd    *exec.Cmd
	exited chan struct{}
	// waitErr is written once before exited is closed.
	waitErr error
	stderr  *pipeline.TailBuffer
	log     *accessLog

	stopOnce sync.Once
	stopErr  error
}

// findBinary resolves the registry executable.
func findBinary(b string) (string, error) {
	if b != "" {
		p, err := exec.LookPath(b)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNotInstalled, b, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("docker-registry"); err == nil {
		return p, nil
	}
	if _, err := os.Stat(DefaultBinary); err == nil {
		return DefaultBinary, nil
	}
	return "", ErrNotInstalled
}

// Start runs a registry on 127.0.0.1 with a free port and returns once /v2/
// answers. The registry is stopped when ctx is done or Stop is called; the
// caller must call Stop to remove its storage.
func Start(ctx context.Context, opts Options) (*Registry, error) {
	bin, err := findBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 20 * time.Second
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if (opts.Username == "") != (opts.Password == "") {
		return nil, errors.New("registry: Username and Password must be set together")
	}
	// Picking a free port and handing it to another process is racy; a
	// lost race shows up as "address already in use" and is retried.
	var lastErr error
	for attempt := 0; attempt < 4; attempt++ {
		r, err := start(ctx, bin, opts)
		if err == nil {
			return r, nil
		}
		lastErr = err
		if opts.Port != 0 || !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, bin string, opts Options) (r *Registry, err error) {
	// The directory is locked by this process: after a kill -9 the next registry's start
	// removes it (the registry itself dies with its owner, see sysProcAttr).
	dir, owner, err := pipeline.OwnedTempDir(dirPattern, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
			owner.Close()
		}
	}()
	port := opts.Port
	if port == 0 {
		if port, err = freePort(opts.Host); err != nil {
			return nil, err
		}
	}
	r = &Registry{
		opts:   opts,
		addr:   net.JoinHostPort(opts.Host, strconv.Itoa(port)),
		dir:    dir,
		owner:  owner,
		exited: make(chan struct{}),
		stderr: pipeline.NewTailBuffer(16 << 10),
		log:    newAccessLog(),
	}
	cfgPath, err := r.writeConfig()
	if err != nil {
		return nil, err
	}

	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.Stdout = r.log // the access log goes to stdout
	cmd.Stderr = r.stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := r.startProcess(cmd); err != nil {
		return nil, fmt.Errorf("registry: start %s: %w", bin, err)
	}
	go func() {
		select {
		case <-ctx.Done():
			r.kill()
		case <-r.exited:
		}
	}()

	if err := r.waitReady(ctx); err != nil {
		r.kill()
		<-r.exited
		return nil, err
	}
	// Whoever holds the port answers /v2/: when another process took it first (a fixed
	// Port in use, or the race between freePort and the bind), that was not us. Only a
	// request in our own access log proves it was.
	if err := r.sync(); err != nil {
		r.kill()
		<-r.exited
		return nil, fmt.Errorf("registry: %s answers, but not the registry started here (%w): %s", r.addr, err, strings.TrimSpace(r.stderr.String()))
	}
	// Readiness probes are not what tests want to count.
	r.Reset()
	opts.Logger.Info("registry started", "addr", r.addr, "tls", opts.TLS, "auth", opts.Username != "", "pid", cmd.Process.Pid)
	return r, nil
}

// writeConfig writes the registry's configuration (and its htpasswd file and certificate
// when asked for) into its directory and returns the configuration's path.
func (r *Registry) writeConfig() (string, error) {
	cfg := config{Addr: r.addr, Storage: filepath.Join(r.dir, "data")}
	if r.opts.Username != "" {
		cfg.Htpasswd = filepath.Join(r.dir, "htpasswd")
		if err := writeHtpasswd(cfg.Htpasswd, r.opts.Username, r.opts.Password); err != nil {
			return "", err
		}
	}
	if r.opts.TLS {
		r.certDir = filepath.Join(r.dir, "certs")
		cfg.Cert = filepath.Join(r.dir, "server.crt")
		cfg.Key = filepath.Join(r.dir, "server.key")
		pool, err := writeSelfSigned(cfg.Cert, cfg.Key, r.certDir)
		if err != nil {
			return "", err
		}
		r.caPool = pool
	}
	p := filepath.Join(r.dir, "config.yml")
	if err := os.WriteFile(p, cfg.render(), 0o600); err != nil {
		return "", fmt.Errorf("registry: write config: %w", err)
	}
	return p, nil
}

// startProcess starts cmd and waits for it in the background, both on one locked OS
// thread that lives as long as the process: the kernel sends the parent-death signal when
// the thread that started the child exits, not the process, and Go may end a thread (a
// goroutine that locked it and returned) long before the process ends.
func (r *Registry) startProcess(cmd *exec.Cmd) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		r.cmd = cmd
		started <- nil
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	return <-started
}

func (r *Registry) waitReady(ctx context.Context) error {
	client := &http.Client{Transport: r.Transport(), Timeout: 2 * time.Second}
	deadline := time.Now().Add(r.opts.StartTimeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/v2/", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			// 401 means up with auth on.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.exited:
			return fmt.Errorf("registry: exited before serving (%v): %s", r.waitErr, strings.TrimSpace(r.stderr.String()))
		case <-ctx.Done():
			return fmt.Errorf("registry: waiting for %s: %w", r.addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("registry: %s did not answer /v2/ within %s: %s", r.addr, r.opts.StartTimeout, strings.TrimSpace(r.stderr.String()))
		}
	}
}

// kill ends the whole process group. Storage is temporary, so there is
// nothing to flush and no point in a graceful shutdown.
func (r *Registry) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	_ = r.cmd.Process.Kill()
}

// Stop kills the registry and removes its storage. It is safe to call more
// than once.
func (r *Registry) Stop() error {
	r.stopOnce.Do(func() {
		r.kill()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			r.stopErr = fmt.Errorf("registry: pid %d did not exit after SIGKILL", r.cmd.Process.Pid)
		}
		if err := os.RemoveAll(r.dir); err != nil && r.stopErr == nil {
			r.stopErr = fmt.Errorf("registry: remove storage: %w", err)
		}
		r.owner.Close() // after the removal, so no other process reaps the directory first
		r.opts.Logger.Info("registry stopped", "addr", r.addr)
	})
	return r.stopErr
}

// CPU is the processor time (user and system) the registry process has used so far, from
// /proc: what a benchmark reads before and after a transfer to see the server's share.
func (r *Registry) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("registry: reading its CPU time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from its end.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("registry: /proc/%d/stat has %d fields after the name", r.cmd.Process.Pid, len(fields))
	}
	var utime, stime int64
	if _, err := fmt.Sscan(fields[11]+" "+fields[12], &utime, &stime); err != nil {
		return 0, fmt.Errorf("registry: /proc/%d/stat: %w", r.cmd.Process.Pid, err)
	}
	// /proc counts in USER_HZ, which Linux fixes at 100 for user space.
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// Done is closed when the registry process has exited.
func (r *Registry) Done() <-chan struct{} { return r.exited }

// Addr is "127.0.0.1:PORT" (or Options.Host's address), the registry part of image references.
func (r *Registry) Addr() string { return r.addr }

// URL is the base URL, http:// or https:// depending on Options.TLS.
func (r *Registry) URL() string {
	if r.opts.TLS {
		return "https://" + r.addr
	}
	return "http://" + r.addr
}

// Ref joins the registry address and a repository path ("a/b:tag" or
// "a/b@sha256:...").
func (r *Registry) Ref(repo string) string { return r.addr + "/" + repo }

// TLS reports whether the registry serves HTTPS.
func (r *Registry) TLS() bool { return r.opts.TLS }

// Credentials returns the basic-auth user and password ("" when auth is off).
func (r *Registry) Credentials() (username, password string) {
	return r.opts.Username, r.opts.Password
}

// CertDir is a directory holding ca.crt, the registry's self-signed
// certificate, in the layout skopeo's --cert-dir and containers/image's
// DockerCertPath expect. Empty without TLS.
func (r *Registry) CertDir() string { return r.certDir }

// CertPool trusts the registry's certificate. Nil without TLS.
func (r *Registry) CertPool() *x509.CertPool { return r.caPool }

// Transport is an HTTP transport that trusts the registry's certificate.
func (r *Registry) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if r.caPool != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: r.caPool, MinVersion: tls.VersionTLS12}
	}
	return t
}

// Dir is the registry's private directory, removed with it: by Stop, or by a later Start
// once its owner has died. Files that mean something only while this registry runs (a
// blueprint naming its address) belong here.
func (r *Registry) Dir() string { return r.dir }

// StorageDir is the registry's filesystem storage root.
func (r *Registry) StorageDir() string { return filepath.Join(r.dir, "data") }

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("registry: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv drops REGISTRY_* variables, which would override the generated
// config.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REGISTRY_") {
			env = append(env, kv)
		}
	}
	return env
}
