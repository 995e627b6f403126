// Package kube starts a real single-node Kubernetes with containerd and Tekton Pipelines
// for tests: etcd (Debian), kube-apiserver, kube-controller-manager, kube-scheduler and
// kubelet built from k8s.io/kubernetes by build.sh (make deps), Debian's containerd, runc
// and CNI plugins, and Tekton's controller as a host process. Every image is local. The
// node lives on a bridge of its own; teardown leaves nothing: no process, mount, cgroup,
// bridge, iptables rule or changed kernel tunable.
package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Images the cluster has loaded, by role.
const (
	BusyboxImage        = "localhost/snofactory-test/busybox:1"
	pauseImage          = "localhost/snofactory-test/pause:1"
	entrypointImage     = "localhost/snofactory-test/tekton-entrypoint:1"
	nopImage            = "localhost/snofactory-test/tekton-nop:1"
	workingDirInitImage = "localhost/snofactory-test/tekton-workingdirinit:1"
	snapshotter         = "overlayfs"
)

// Cluster is a running cluster.
type Cluster struct {
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	// Socket is containerd's; Images imports into it.
	Socket string
	network

	bins       binaries
	cgroupRoot string
	apiPort    int
	procs      []*proc // in start order
	sysctls    map[string]string
	ruleAdded  bool
	// hostDirs are the host directories the kubelet and libcni create if absent, with
	// whether each existed before the cluster started.
	hostDirs map[string]bool
	// StartupTime is from nothing to a Ready node with Tekton's controller running.
	StartupTime time.Duration
}

type binaries struct {
	apiserver, node, tekton                         string // build/kube's apiserver, build/kube/node and its tekton/
	etcd, containerd, ctr, runc, shim, cni, busybox string
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return "", errors.New("no go.mod above the working directory")
	}
}

// findBinaries names everything missing at once, and what installs it.
func findBinaries() (binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{node: filepath.Join(root, "build", "kube", "node"), cni: "/usr/lib/cni"}
	// test/kubeapi/build.sh's apiserver, which reports its version (Tekton checks it).
	b.apiserver, b.tekton = filepath.Join(root, "build", "kube", "kube-apiserver"), filepath.Join(b.node, "tekton")
	var missing []string
	for _, f := range []string{"stamp", "kube-controller-manager", "kube-scheduler", "kubelet",
		"tekton/controller", "tekton/entrypoint", "tekton/nop", "tekton/workingdirinit", "tekton/crds", "tekton/config"} {
		if _, err := os.Stat(filepath.Join(b.node, f)); err != nil {
			missing = append(missing, filepath.Join(b.node, f))
		}
	}
	if _, err := os.Stat(b.apiserver); err != nil {
		missing = append(missing, b.apiserver)
	}
	for _, f := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(b.cni, f)); err != nil {
			missing = append(missing, "CNI plugin "+f+" (Debian package containernetworking-plugins)")
		}
	}
	look := func(dst *string, name, pkg string) {
		if *dst, err = exec.LookPath(name); err != nil {
			missing = append(missing, name+" (Debian package "+pkg+")")
		}
	}
	look(&b.etcd, "etcd", "etcd-server")
	look(&b.containerd, "containerd", "containerd")
	look(&b.shim, "containerd-shim-runc-v2", "containerd")
	look(&b.ctr, "ctr", "containerd")
	look(&b.runc, "runc", "runc")
	look(&b.busybox, "busybox", "busybox-static")
	for _, tool := range []string{"ip", "iptables"} {
		var p string
		look(&p, tool, map[string]string{"ip": "iproute2", "iptables": "iptables"}[tool])
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing %s: run `make deps` (it installs the Debian packages and builds Kubernetes and Tekton once into build/kube/node)", strings.Join(missing, ", "))
	}
	return b, nil
}

// Start starts the cluster and returns once the node is Ready, the default service account
// exists and Tekton's controller runs. Everything is torn down at the test's cleanup, also
// when the test fails half-way through Start. It needs root and the host's lock, held
// by the caller from before it looks at the host until after its last check of it; under
// -short it is skipped.
func Start(t testing.TB, lock *HostLock) *Cluster {
	t.Helper()
	if err := Ready(lock); err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // a ceiling for a loaded machine
	defer cancel()
	c, err := Up(ctx, lock, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("tearing the cluster down: %v", err)
		}
	})
	return c
}

// Ready says what this host lacks to start a cluster (binaries, root, the host's lock),
// or nil.
func Ready(lock *HostLock) error {
	_, err := findBinaries()
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("a real cluster needs root (bridges, mounts, cgroups): run as root")
	}
	if err == nil && lock == nil {
		err = errors.New("starting a cluster needs the host's lock (LockHost)")
	}
	return err
}

// Up starts a cluster in dir (an empty directory the caller removes after Stop) for a
// program that is not a test; Start is Up for a test. On failure it has torn down what it
// started, and its error carries the tail of each server's log. The caller stops a
// cluster Up returned.
func Up(ctx context.Context, lock *HostLock, dir string, logf func(string, ...any)) (*Cluster, error) {
	if err := Ready(lock); err != nil {
		return nil, err
	}
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the cluster's directory: %w", err)
	}
	began := time.Now()
	c := &Cluster{Dir: dir, bins: bins}
	c.cgroupRoot = "/" + cgroupPrefix + filepath.Base(filepath.Dir(c.Dir))
	if err = reclaimStale(ctx, logf); err == nil {
		c.network, err = pickNetwork(logf)
	}
	if err == nil {
		err = c.start(ctx)
	}
	if err != nil {
		err = fmt.Errorf("starting the cluster: %w", c.withLogs(err))
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("tearing the cluster down: %w", stopErr))
		}
		return nil, err
	}
	c.StartupTime = time.Since(began)
	logf("cluster up in %s (node Ready, Tekton's controller running)", c.StartupTime.Round(time.Second))
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	var err error
	c.hostDirs = existing(hostDirs)
	if c.sysctls, err = readSysctls(); err != nil {
		return err
	}
	if err := c.addBridge(ctx); err != nil {
		return err
	}
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	return c.startTekton(ctx)
}

// failWithLogs fails the test with err and the tail of each server's log.
func (c *Cluster) failWithLogs(t testing.TB, err error) {
	t.Helper()
	t.Fatal(c.withLogs(err))
}

// withLogs is err followed by the tail of each server's log.
func (c *Cluster) withLogs(err error) error {
	var b strings.Builder
	for _, p := range c.procs {
		state := "running"
		if p.exited() {
			state = "exited"
		}
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s\n", p.name, state, p.tail())
	}
	return fmt.Errorf("%w%s", err, b.String())
}

func (c *Cluster) add(p *proc, err error) error {
	if err == nil {
		c.procs = append(c.procs, p)
	}
	return err
}

// Stop tears everything down in the order that frees each thing: servers that would
// recreate pods first, then the pods' processes and shims, containerd, mounts, cgroups,
// the network, the kernel tunables. It goes on past errors and returns them all.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		if p := c.procs[i]; p.name == "tekton-controller" || p.name == "kubelet" || p.name == "kube-controller-manager" || p.name == "kube-scheduler" {
			p.stop(30 * time.Second)
		}
	}
	for _, pid := range cgroupPids(c.cgroupRoot) {
		errs = append(errs, killAndWait(pid))
	}
	if c.Socket != "" {
		for _, pid := range pidsMatching(c.Socket) { // the shims name containerd's address
			errs = append(errs, killAndWait(pid))
		}
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(30 * time.Second)
	}
	c.procs = nil
	errs = append(errs, unmountUnder(c.Dir), removeCgroups(c.cgroupRoot), c.removeHostFiles())
	ctx := context.Background()
	if c.ruleAdded {
		errs = append(errs, iptables(ctx, "-D", c.dnatRule(c.apiPort)))
		c.ruleAdded = false
	}
	if c.Bridge != "" {
		errs = append(errs, c.delBridge(ctx))
	}
	if c.sysctls != nil {
		errs = append(errs, restoreSysctls(c.sysctls))
	}
	return errors.Join(errs...)
}

// removeHostFiles removes what the kubelet and CNI write outside their configured
// directories: the kubelet's links in /var/log/containers (a constant in
// pkg/kubelet/kuberuntime, ContainerLogsDir) and libcni's result cache in /var/lib/cni.
func (c *Cluster) removeHostFiles() error {
	var errs []error
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if dst, err := os.Readlink(l); err == nil && strings.HasPrefix(dst, c.Dir+"/") {
			errs = append(errs, os.Remove(l))
		}
	}
	// NETWORK-SANDBOXID-IFNAME, for our network and containerd's own loopback network.
	sandboxes, _ := os.ReadDir(c.path("containerd/root/io.containerd.grpc.v1.cri/sandboxes"))
	for _, sb := range sandboxes {
		cached, _ := filepath.Glob(filepath.Join(cniResults, "*-"+sb.Name()+"-*"))
		for _, f := range cached {
			errs = append(errs, os.Remove(f))
		}
	}
	for _, d := range hostDirs { // deepest first; one another program has filled stays
		if existed, known := c.hostDirs[d]; known && !existed {
			os.Remove(d)
		}
	}
	return errors.Join(errs...)
}

// hostDirs are made by the kubelet (its log links) and libcni (its cache) when absent.
var hostDirs = []string{"/var/log/containers", cniResults, "/var/lib/cni"}

func existing(dirs []string) map[string]bool {
	m := map[string]bool{}
	for _, d := range dirs {
		_, err := os.Stat(d)
		m[d] = err == nil
	}
	return m
}
