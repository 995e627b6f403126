package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The node's network: a bridge of its own with the node's address, which is also the pods'
// only gateway. Nothing else on the host changes but one DNAT rule, removed at teardown.
// Each cluster picks a /24 of bridgePrefix no interface or route on the host touches and
// names its bridge after it, so a bridge a killed run left (or another run's, in a mount
// namespace the lock does not reach) never stops the next.
const (
	bridgePrefix = "snfkube"
	subnetPrefix = "10.244."
	// ServiceIP is the kubernetes Service's address: the first of the service range.
	ServiceIP    = "10.96.0.1"
	serviceRange = "10.96.0.0/24"
	// lockPath serializes clusters on one host: the kubelet's kernel tunables, libcni's
	// cache and the host directories are shared, and each cluster puts them back.
	lockPath = "/run/lock/snofactory-test-kube.lock"
	// cgroupPrefix begins the name of each cluster's cgroup root.
	cgroupPrefix = "snofactory-kube-"
	// cniResults is libcni's result cache (libcni's defaultCacheDir, results/).
	cniResults = "/var/lib/cni/results"
)

// network is one cluster's bridge and addresses.
type network struct {
	Bridge    string
	NodeIP    string
	PodSubnet string
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// HostLock is held while a test looks at or changes what clusters share on the host.
type HostLock struct{ f *os.File }

// LockHost waits for any other cluster on this host to be torn down and checked, and holds
// the lock until t ends; the lock goes with the process, so a killed run never holds it.
// It returns nil where the lock cannot be had without root: Start then says why.
func LockHost(t testing.TB) *HostLock {
	t.Helper()
	l, err := WaitHostLock(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		t.Cleanup(l.Release)
	}
	return l
}

// WaitHostLock is LockHost for a program that is not a test: the caller releases the lock
// after its cluster's teardown. It returns nil and no error without root.
func WaitHostLock(logf func(string, ...any)) (*HostLock, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the host's cluster lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return &HostLock{f}, nil
	}
	logf("another test/kube cluster runs on this host; waiting for it to be torn down (%s)", lockPath)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return &HostLock{f}, nil
}

// Release gives the lock up (closing the file releases the flock).
func (l *HostLock) Release() { l.f.Close() }

// pickNetwork chooses the first /24 under subnetPrefix that no address or route on the
// host falls in and whose bridge name is free; leftover bridges are named in the log.
func pickNetwork(logf func(string, ...any)) (network, error) {
	used, err := usedIPv4()
	if err != nil {
		return network{}, err
	}
	links, _ := filepath.Glob("/sys/class/net/" + bridgePrefix + "*")
	for _, l := range links {
		logf("bridge %s is left by a killed test run, or is another run's: `ip link del %s` removes it", filepath.Base(l), filepath.Base(l))
	}
	for n := 1; n < 255; n++ {
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("%s%d.0/24", subnetPrefix, n))
		if slices.ContainsFunc(used, func(u *net.IPNet) bool { return u.Contains(subnet.IP) || subnet.Contains(u.IP) }) {
			continue
		}
		name := fmt.Sprintf("%s%d", bridgePrefix, n)
		if _, err := os.Stat("/sys/class/net/" + name); err == nil {
			continue
		}
		return network{Bridge: name, NodeIP: fmt.Sprintf("%s%d.1", subnetPrefix, n), PodSubnet: subnet.String()}, nil
	}
	return network{}, fmt.Errorf("every /24 of %s0.0/16 is in use on this host", subnetPrefix)
}

// usedIPv4 is every IPv4 network on the host: the interfaces' and the main routes'.
func usedIPv4() ([]*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the host's addresses: %w", err)
	}
	var used []*net.IPNet
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			used = append(used, ipn)
		}
	}
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the host's routes: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst := f[0]
		if slices.Contains([]string{"local", "broadcast", "unicast", "blackhole", "unreachable"}, dst) && len(f) > 1 {
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, ipn, err := net.ParseCIDR(dst); err == nil {
			used = append(used, ipn)
		}
	}
	return used, nil
}

// podRangeStart is the first address host-local gives a pod: the ones below stay for the
// node and what tests run on the bridge beside it.
func (n network) podRangeStart() string {
	return strings.TrimSuffix(n.NodeIP, ".1") + ".10"
}

// addBridge makes the node's bridge.
func (n network) addBridge(ctx context.Context) error {
	if err := run(ctx, "ip", "link", "add", n.Bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "addr", "add", n.NodeIP+"/24", "dev", n.Bridge); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", n.Bridge, "up")
}

func (n network) delBridge(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err != nil {
		return nil
	}
	return run(ctx, "ip", "link", "del", n.Bridge)
}

// dnatRule sends the pods' connections to the kubernetes Service to the apiserver: the
// one thing kube-proxy would do that this cluster needs (pods reach the API through
// KUBERNETES_SERVICE_HOST). Only packets arriving from the bridge match.
func (n network) dnatRule(apiPort int) []string {
	return []string{"-t", "nat", "PREROUTING", "-i", n.Bridge, "-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "snofactory test/kube", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", n.NodeIP, apiPort)}
}

func iptables(ctx context.Context, op string, rule []string) error {
	return run(ctx, "iptables", append([]string{"-w", rule[0], rule[1], op}, rule[2:]...)...)
}

// The kubelet sets these kernel tunables at start unless they already hold its values
// (pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables), and offers only
// "modify" or "fail". The harness records them first and puts them back at teardown.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readSysctls() (map[string]string, error) {
	m := map[string]string{}
	for _, s := range kubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, fmt.Errorf("reading a kernel tunable: %w", err)
		}
		m[s] = strings.TrimSpace(string(b))
	}
	return m, nil
}

func restoreSysctls(m map[string]string) error {
	var errs []error
	for s, v := range m {
		if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring kernel tunable %s=%s: %w", s, v, err))
		}
	}
	return errors.Join(errs...)
}

// reclaimStale removes what killed runs left that would get in the way or pile up: DNAT
// rules whose bridge is gone (a later cluster may take the bridge's name, and the old rule,
// first in the chain, would send its pods to a dead apiserver) and cgroup roots no process
// is in. A live cluster keeps its bridge and has processes in its cgroups, so neither is
// touched, also one this host's lock does not see.
func reclaimStale(ctx context.Context, logf func(string, ...any)) error {
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		return fmt.Errorf("listing the nat table's PREROUTING rules: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		bridge, dest, ok := parseDNATRule(line)
		if !ok {
			continue
		}
		if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
			continue
		}
		host, port, err := net.SplitHostPort(dest)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			continue
		}
		logf("removing a DNAT rule a killed run left: %s", line)
		errs = append(errs, iptables(ctx, "-D", network{Bridge: bridge, NodeIP: host}.dnatRule(p)))
	}
	errs = append(errs, reclaimCNICache(logf))
	for _, ctl := range cgroupControllers() {
		roots, _ := filepath.Glob(filepath.Join(ctl, cgroupPrefix+"*"))
		for _, r := range roots {
			if name := filepath.Base(r); len(cgroupPids(name)) == 0 {
				errs = append(errs, removeCgroups(name))
			}
		}
	}
	return errors.Join(errs...)
}

// reclaimCNICache removes libcni's cached results of our network, and of containerd's
// loopback network for the same sandboxes: with the host's lock held no cluster sharing
// this /var/lib/cni is alive, so every one of them is a killed run's.
func reclaimCNICache(logf func(string, ...any)) error {
	var errs []error
	cached, _ := filepath.Glob(filepath.Join(cniResults, cniNetwork+"-*"))
	for _, f := range cached {
		// NETWORK-SANDBOXID-IFNAME
		id := strings.TrimPrefix(filepath.Base(f), cniNetwork+"-")
		if i := strings.LastIndexByte(id, '-'); i > 0 {
			id = id[:i]
		}
		logf("removing libcni's cached result a killed run left: %s", f)
		errs = append(errs, os.Remove(f))
		loopback, _ := filepath.Glob(filepath.Join(cniResults, "cni-loopback-"+id+"-*"))
		for _, l := range loopback {
			errs = append(errs, os.Remove(l))
		}
	}
	return errors.Join(errs...)
}

// parseDNATRule reads the bridge and destination of one of our rules as iptables -S prints it.
func parseDNATRule(line string) (bridge, dest string, ok bool) {
	if !strings.Contains(line, `"snofactory test/kube"`) {
		return "", "", false
	}
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "-i":
			bridge = f[i+1]
		case "--to-destination":
			dest = f[i+1]
		}
	}
	return bridge, dest, bridge != "" && dest != ""
}
