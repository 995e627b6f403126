package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The node's network: a bridge of its own with the node's address, which is also the pods'
// only gateway. Nothing else on the host changes but one DNAT rule, removed at teardown.
const (
	BridgeName = "snfkube0"
	NodeIP     = "10.244.77.1"
	PodSubnet  = "10.244.77.0/24"
	// ServiceIP is the kubernetes Service's address: the first of the service range.
	ServiceIP    = "10.96.0.1"
	serviceRange = "10.96.0.0/24"
)

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// addBridge makes the node's bridge; one left by a killed run is named in the error.
func addBridge(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err == nil {
		return fmt.Errorf("a network interface %s already exists (left by a killed test run?): remove it with `ip link del %s`", BridgeName, BridgeName)
	}
	if err := run(ctx, "ip", "link", "add", BridgeName, "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "addr", "add", NodeIP+"/24", "dev", BridgeName); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", BridgeName, "up")
}

func delBridge(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err != nil {
		return nil
	}
	return run(ctx, "ip", "link", "del", BridgeName)
}

// dnatRule sends the pods' connections to the kubernetes Service to the apiserver: the
// one thing kube-proxy would do that this cluster needs (pods reach the API through
// KUBERNETES_SERVICE_HOST). Only packets arriving from the bridge match.
func dnatRule(apiPort int) []string {
	return []string{"-t", "nat", "PREROUTING", "-i", BridgeName, "-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "snofactory test/kube", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", NodeIP, apiPort)}
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
