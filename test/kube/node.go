package kube

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

const (
	nodeName   = "snofactory-kube"
	cniNetwork = "snofactory-test-kube"
)

// containerdConfig keeps every path containerd, its shims and runc write under dir, and
// the network namespaces too (netns_mounts_under_state_dir). runc cannot write
// oom_score_adj here, hence restrict_oom_score_adj; no AppArmor profile is loaded.
func (c *Cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %[7]q
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[8]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[9]q
    conf_dir = %[10]q
`, c.path("containerd/root"), c.path("containerd/state"), c.Socket, c.Socket+".ttrpc", c.path("containerd/opt"),
		pauseImage, snapshotter, c.path("runc"), c.bins.cni, c.path("cni"))
}

// cniConfig puts pods on the node's bridge with routes to the bridge and the kubernetes
// Service only: no default route, so a pod cannot reach any address off the bridge, and
// the bridge plugin is not the gateway, so it leaves the host's ip_forward alone.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion": "0.4.0", "name": %q, "plugins": [{"type": "bridge", "bridge": %q,
  "isGateway": false, "ipMasq": false,
  "ipam": {"type": "host-local", "dataDir": %q,
    "ranges": [[{"subnet": %q, "rangeStart": %q, "gateway": %q}]],
    "routes": [{"dst": "%s/32", "gw": %q}]}}]}`, cniNetwork, c.Bridge, c.path("cni-ipam"), c.PodSubnet, c.podRangeStart(), c.NodeIP, ServiceIP, c.NodeIP)
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	c.Socket = c.path("containerd.sock")
	for _, d := range []string{"cni", "runc", "containerd"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(c.path("containerd.toml"), []byte(c.containerdConfig()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("cni/10-bridge.conflist"), []byte(c.cniConfig()), 0o600); err != nil {
		return err
	}
	if err := c.add(startProc(c.Dir, "containerd", c.bins.containerd, nil, "--config", c.path("containerd.toml"))); err != nil {
		return err
	}
	if err := c.waitSocket(ctx, c.Socket); err != nil {
		return err
	}
	return c.loadImages(ctx)
}

// waitSocket waits until something accepts on a unix socket (there is nothing to watch
// before containerd listens); it ends with ctx or the server's exit.
func (c *Cluster) waitSocket(ctx context.Context, path string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return nil
		}
		if err := c.exitedServer(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// loadImages imports the images Tekton's pods need: busybox (the sandbox, the shell of
// place-scripts, the test steps) and Tekton's own binaries at /ko-app/NAME, where ko puts
// them and where the controller's pod spec calls them (pkg/pod/entrypoint.go).
func (c *Cluster) loadImages(ctx context.Context) error {
	bb, err := Busybox(BusyboxImage)
	if err != nil {
		return err
	}
	// The pod sandbox only has to stay alive until containerd kills it (SIGKILL, in the CRI
	// plugin's StopPodSandbox), as the pause image does.
	pause := bb
	pause.Ref, pause.Entrypoint = pauseImage, []string{"/bin/sleep", "2147483647"}
	images := []Image{bb, pause}
	for ref, name := range map[string]string{entrypointImage: "entrypoint", nopImage: "nop", workingDirInitImage: "workingdirinit"} {
		images = append(images, Image{Ref: ref, Entrypoint: []string{"/ko-app/" + name},
			Files: []File{{Path: "/ko-app/" + name, Source: filepath.Join(c.bins.tekton, name)}}})
	}
	for _, im := range images {
		if err := c.Load(ctx, im); err != nil {
			return err
		}
	}
	return nil
}

// Load imports an image into the cluster's containerd.
func (c *Cluster) Load(ctx context.Context, im Image) error {
	archive := filepath.Join(c.Dir, "image.tar")
	if err := im.writeArchive(archive); err != nil {
		return fmt.Errorf("writing image %s: %w", im.Ref, err)
	}
	defer os.Remove(archive)
	return importImage(ctx, c.Socket, snapshotter, archive)
}

// kubeletConfig: cgroup v1 with the cgroupfs driver under a cgroup of the test's own,
// everything under dir, no DNS server of the machine's in the pods, no image GC (the
// images are local and cannot be pulled again) and eviction only when truly out of room.
// makeIPTablesUtilChains is off: otherwise the kubelet adds KUBE-FIREWALL to the host's
// INPUT and OUTPUT chains and canary chains, and never removes them (pkg/kubelet/kubelet.go,
// Run; kubelet_network_linux.go, syncIPTablesRules).
func (c *Cluster) kubeletConfig(port int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: %d
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: "unix://%s"
resolvConf: %q
podLogsDir: %q
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
serializeImagePulls: false
maxPods: 30
makeIPTablesUtilChains: false
`, c.NodeIP, port, c.cgroupRoot, c.Socket, c.path("resolv.conf"), c.path("pod-logs"))
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	if err := makeCgroup(c.cgroupRoot); err != nil { // the kubelet wants its cgroup root to exist
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("resolv.conf"), nil, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(c.kubeletConfig(ports[0])), 0o600); err != nil {
		return err
	}
	if err := c.add(startProc(c.Dir, "kubelet", filepath.Join(c.bins.node, "kubelet"), nil,
		"--config", c.path("kubelet.yaml"), "--kubeconfig", c.Kubeconfig, "--root-dir", c.path("kubelet"),
		"--node-ip", c.NodeIP, "--hostname-override", nodeName, "--cert-dir", c.path("kubelet-pki"))); err != nil {
		return err
	}
	if err := c.waitNamed(ctx, &corev1.Node{}, "", nodeName, func(o runtime.Object) bool {
		for _, cond := range o.(*corev1.Node).Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	}); err != nil {
		return fmt.Errorf("waiting for node %s to be Ready: %w", nodeName, err)
	}
	// Pods mount the default service account's token and the cluster CA, which the
	// controller-manager provides.
	if err := c.waitNamed(ctx, &corev1.ServiceAccount{}, "default", "default", func(runtime.Object) bool { return true }); err != nil {
		return fmt.Errorf("waiting for the default service account: %w", err)
	}
	return c.waitNamed(ctx, &corev1.ConfigMap{}, "default", "kube-root-ca.crt", func(runtime.Object) bool { return true })
}

// waitNamed watches one core object until cond holds (or ctx ends, or a server exits).
func (c *Cluster) waitNamed(ctx context.Context, obj runtime.Object, ns, name string, cond func(runtime.Object) bool) error {
	resource := map[string]string{"*v1.Node": "nodes", "*v1.ServiceAccount": "serviceaccounts", "*v1.ConfigMap": "configmaps", "*v1.Namespace": "namespaces"}[fmt.Sprintf("%T", obj)]
	lw := cache.NewListWatchFromClient(c.Client.CoreV1().RESTClient(), resource, ns, fields.OneTermEqualSelector("metadata.name", name))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.cancelOnExit(ctx, cancel)
	_, err := watchtools.UntilWithSync(ctx, lw, obj, nil, func(ev watch.Event) (bool, error) {
		return ev.Object != nil && cond(ev.Object), nil
	})
	if err != nil {
		if e := c.exitedServer(); e != nil {
			return e
		}
	}
	return err
}

// cancelOnExit cancels a wait when a server exits: nothing it waits for can happen then.
func (c *Cluster) cancelOnExit(ctx context.Context, cancel context.CancelFunc) {
	for _, p := range c.procs {
		go func() {
			select {
			case <-p.done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
}
