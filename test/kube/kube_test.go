package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/snofactory/snofactory/test/testbin"
)

// The cases that need a real cluster share one, started once: a cluster start is the
// same for each, and the suite's time is what make test must keep under its limit.
func TestOnRealCluster(t *testing.T) {
	onRealCluster(t, func(t *testing.T, c *Cluster, mark func(string)) {
		t.Run("TaskRun", func(t *testing.T) { checkTaskRun(t, c) })
		e := startPipelineEnv(t.Context(), t, c, mark)
		// The depot's builds are the PipelineRun case's blueprint again: with its cache warm
		// they cost a publish each.
		if t.Run("PipelineRun", func(t *testing.T) { checkPipelineRun(t, e) }) {
			t.Run("DepotOnTekton", func(t *testing.T) { checkDepotOnTekton(t, e) })
			t.Run("DepotCtrlC", func(t *testing.T) { checkDepotCtrlC(t, e) })
		}
	})
}

// onRealCluster starts a cluster in a subtest and runs cases on it; after the cluster's
// teardown nothing of it, or of what the cases started beside it (each named by a marker
// they pass to mark as soon as they start it: a registry's directory), is left, also when
// a case failed half-way: no process, mount, cgroup, bridge, iptables rule, host file or
// directory, or changed kernel tunable.
func onRealCluster(t *testing.T, cases func(t *testing.T, c *Cluster, mark func(marker string))) {
	lock := LockHost(t) // from the first look at the host to the last: clusters take turns
	before, err := readSysctls()
	if err != nil {
		t.Fatal(err)
	}
	stale := leaveStale(t) // first: the directories it makes are its to remove
	dirsBefore := existing(hostDirs)
	var dir, cgroupRoot, bridge string
	var markers []string
	t.Run("cluster", func(t *testing.T) {
		c := Start(t, lock)
		dir, cgroupRoot, bridge = c.Dir, c.cgroupRoot, c.Bridge
		stale.checkReclaimed(t, c)
		cases(t, c, func(m string) { markers = append(markers, m) })
	})
	if dir == "" {
		return
	}
	for _, left := range append(leftovers(dir, cgroupRoot, bridge), leftProcesses(markers)...) {
		t.Errorf("left after teardown: %s", left)
	}
	for d, after := range existing(hostDirs) {
		if after && !dirsBefore[d] {
			t.Errorf("left after teardown: directory %s", d)
		}
	}
	if after, err := readSysctls(); err != nil || !equalMaps(before, after) {
		t.Errorf("kernel tunables changed: before %v, after %v (%v)", before, after, err)
	}
}

// staleState is what a run killed before its teardown leaves: the bridge, with its
// address, that the next cluster would have taken, a DNAT rule whose bridge is gone, and
// an empty cgroup root. The cluster must start beside the bridge and remove the others.
type staleState struct {
	network
	ruleBridge, cgroup, cniCache string
}

func leaveStale(t *testing.T) staleState {
	if os.Geteuid() != 0 {
		return staleState{}
	}
	n, err := pickNetwork(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	s := staleState{network: n, ruleBridge: bridgePrefix + "253", cgroup: "/" + cgroupPrefix + "stale-" + testbin.RandomHex(t, 4)}
	gone := network{Bridge: s.ruleBridge, NodeIP: "10.244.253.1"}
	t.Cleanup(func() {
		iptables(context.Background(), "-D", gone.dnatRule(1)) // if the cluster did not
		removeCgroups(s.cgroup)
		if err := n.delBridge(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := n.addBridge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/class/net/" + s.ruleBridge); err == nil {
		t.Fatalf("%s exists: this test needs it absent", s.ruleBridge)
	}
	if err := iptables(t.Context(), "-A", gone.dnatRule(1)); err != nil {
		t.Fatal(err)
	}
	if err := makeCgroup(s.cgroup); err != nil {
		t.Fatal(err)
	}
	// libcni's cache of a sandbox the killed run's kubelet never tore down.
	s.cniCache = filepath.Join(cniResults, cniNetwork+"-"+testbin.RandomHex(t, 32)+"-eth0")
	existed := existing(hostDirs)
	t.Cleanup(func() {
		os.Remove(s.cniCache)
		for _, d := range hostDirs { // deepest first
			if !existed[d] {
				os.Remove(d)
			}
		}
	})
	if err := os.MkdirAll(cniResults, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.cniCache, []byte(`{"kind":"cniCacheV1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkReclaimed: the cluster took another network and removed the stale rule, cgroup and
// cache entry.
func (s staleState) checkReclaimed(t *testing.T, c *Cluster) {
	if c.Bridge == s.Bridge || c.PodSubnet == s.PodSubnet {
		t.Errorf("the cluster took %s %s, the network a killed run left", c.Bridge, c.PodSubnet)
	}
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil || strings.Contains(string(out), "-i "+s.ruleBridge+" ") {
		t.Errorf("the DNAT rule of gone bridge %s is still there (%v):\n%s", s.ruleBridge, err, out)
	}
	for _, ctl := range cgroupControllers() {
		if _, err := os.Stat(filepath.Join(ctl, s.cgroup)); err == nil {
			t.Errorf("the empty cgroup root %s a killed run left is still there", filepath.Join(ctl, s.cgroup))
		}
	}
	if _, err := os.Stat(s.cniCache); err == nil {
		t.Errorf("libcni's cached result %s a killed run left is still there", s.cniCache)
	}
}

// A TaskRun sent as v1 runs for real: Tekton's controller makes the pod, the kubelet runs
// its init containers (entrypoint copy, place-scripts) and the step in the local busybox
// image, and the step's result comes back through the termination message. The step also
// shows the pod's network: the kubernetes Service answers through the DNAT rule, and the
// pod has no route off the bridge.
func checkTaskRun(t *testing.T, c *Cluster) {
	tr := runTaskRun(t, c, helloTaskRun)
	if got := conditionStatus(tr, "Succeeded"); got != "True" {
		t.Fatalf("TaskRun did not succeed: %v", tr.Object["status"])
	}
	results := map[string]string{}
	list, _, _ := unstructured.NestedSlice(tr.Object, "status", "results")
	for _, r := range list {
		m, _ := r.(map[string]any)
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		results[name] = value
	}
	if results["hostname"] != "hello-pod" {
		t.Errorf("result hostname = %q, want the pod's name hello-pod", results["hostname"])
	}
	if results["api"] != "open" {
		t.Errorf("result api = %q: the pod did not reach the kubernetes Service at %s:443", results["api"], ServiceIP)
	}
	if strings.Contains(results["routes"], "default") || !strings.Contains(results["routes"], c.PodSubnet) {
		t.Errorf("the pod's routes reach off the bridge:\n%s", results["routes"])
	}
}

const helloTaskRun = `
apiVersion: tekton.dev/v1
kind: TaskRun
metadata: {name: hello, namespace: default}
spec:
  taskSpec:
    results: [{name: hostname}, {name: api}, {name: routes}]
    steps:
    - name: hello
      image: ` + BusyboxImage + `
      script: |
        #!/bin/sh
        set -e
        printf %s "$(hostname)" > $(results.hostname.path)
        if nc -w 20 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" -e /bin/true; then echo -n open; else echo -n closed; fi > $(results.api.path)
        ip route > $(results.routes.path)
`

// runTaskRun creates a TaskRun and watches it until it has finished.
func runTaskRun(t *testing.T, c *Cluster, doc string) *unstructured.Unstructured {
	t.Helper()
	return runToEnd(t, c, TaskRuns, 10*time.Minute, doc)
}

// runToEnd creates a TaskRun or PipelineRun (gvr) and watches it until it has finished or
// limit (a ceiling for a loaded machine) has passed.
func runToEnd(t *testing.T, c *Cluster, gvr schema.GroupVersionResource, limit time.Duration, doc string) *unstructured.Unstructured {
	t.Helper()
	done, err := c.RunToEnd(t.Context(), gvr, limit, doc, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// leftovers lists what a torn-down cluster left on the host.
func leftovers(dir, cgroupRoot, bridge string) []string {
	left := leftProcesses([]string{dir})
	for _, m := range mountsUnder(dir) {
		left = append(left, "mount "+m)
	}
	for _, ctl := range cgroupControllers() {
		if _, err := os.Stat(filepath.Join(ctl, cgroupRoot)); err == nil {
			left = append(left, "cgroup "+filepath.Join(ctl, cgroupRoot))
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		left = append(left, "bridge "+bridge)
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		for _, table := range []string{"nat", "filter", "mangle"} {
			out, _ := exec.Command(save, "-t", table).Output()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, bridge) || strings.Contains(line, ServiceIP) || strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") {
					left = append(left, save+" "+table+": "+line)
				}
			}
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if dst, _ := os.Readlink(l); strings.HasPrefix(dst, dir+"/") {
			left = append(left, "log link "+l)
		}
	}
	cached, _ := filepath.Glob(filepath.Join(cniResults, cniNetwork+"-*"))
	for _, f := range cached {
		left = append(left, "CNI cache "+f)
	}
	return left
}

// leftProcesses lists the processes whose command line or environment holds one of
// markers, and each marker that is a directory still there.
func leftProcesses(markers []string) []string {
	var left []string
	for _, m := range markers {
		for _, pid := range pidsMatching(m) {
			b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
			left = append(left, "process "+strings.ReplaceAll(string(b), "\x00", " "))
		}
		if _, err := os.Stat(m); err == nil {
			left = append(left, "directory "+m)
		}
	}
	return left
}

func itoa(i int) string { return strconv.Itoa(i) }

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
