package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/test/kube"
	"github.com/snofactory/snofactory/test/registry"
)

// tektonLine is the figure's name: one PipelineRun of the demo against `snofactory build`.
const tektonLine = "tekton-pipelinerun-vs-build"

// benchTekton builds the demo blueprint through publish twice on a cold cache: as one
// PipelineRun of pipeline/tekton's Pipeline (prepare, factory-vm, publish) on test/kube's
// single-node cluster, and as `snofactory build` on the host, with the same binary, the
// same kind of registry on the cluster's bridge (basic auth, a registry each so neither
// push finds the other's blobs) and the same signing. The cluster's start, the image's
// build and load are not counted: a depot's cluster is running already. Where the host
// cannot run the cluster the figure is SKIPPED with the reason.
func benchTekton(ctx context.Context, dir string) ([]Result, error) {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "tekton: "+format+"\n", args...) }
	lock, err := kube.WaitHostLock(logf)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		defer lock.Release() // after the cluster's teardown, deferred below
	}
	err = kube.Ready(lock)
	if _, lookErr := exec.LookPath("buildah"); err == nil && lookErr != nil {
		err = errors.New("the snofactory image needs buildah (Debian package buildah)")
	}
	if err != nil {
		return []Result{{Name: tektonLine, Skipped: err.Error()}}, nil
	}
	// The cluster names its cgroup root after its directory's parent: this round's.
	c, err := kube.Up(ctx, lock, filepath.Join(dir, "cluster"), logf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			logf("tearing the cluster down: %v", err)
		}
	}()
	var regs []*registry.Registry
	defer func() {
		for _, r := range regs {
			r.Stop()
		}
	}()
	d, err := kube.SetUpDemo(ctx, c, filepath.Join(dir, "demo"), func(r *registry.Registry) { regs = append(regs, r) })
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := d.Run(ctx, "bench", logf); err != nil {
		return nil, err
	}
	tekton := time.Since(start)
	host, err := hostBuild(ctx, d, c.NodeIP, filepath.Join(dir, "host"), func(r *registry.Registry) { regs = append(regs, r) })
	if err != nil {
		return nil, err
	}
	logf("the demo through publish: %.1fs as a PipelineRun, %.1fs as snofactory build", tekton.Seconds(), host.Seconds())
	return []Result{{Name: tektonLine, Unit: "s", Ours: tekton.Seconds(), Baseline: host.Seconds(),
		Beside: []string{fmt.Sprintf("overhead=%.0fs", (tekton - host).Seconds())}}}, nil
}

// hostBuild runs `snofactory build` of the demo through publish on a cold cache in dir,
// pushing to a registry of its own on the cluster's bridge with the demo's credentials
// and signing key, and returns its wall time.
func hostBuild(ctx context.Context, d *kube.Demo, host, dir string, started func(*registry.Registry)) (time.Duration, error) {
	user, password := d.Registry().Credentials()
	reg, err := registry.Start(ctx, registry.Options{Host: host, Username: user, Password: password})
	if err != nil {
		return 0, fmt.Errorf("starting the host build's registry: %w", err)
	}
	started(reg)
	bp, err := d.WriteSource(filepath.Join(dir, "source"), reg.Ref(kube.DemoRepo))
	if err != nil {
		return 0, err
	}
	auth := filepath.Join(dir, "auth.json")
	if _, err := kube.WriteAuth(auth, reg); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := buildUntilEnv(ctx, d.Bin(), bp, "publish", filepath.Join(dir, "cache"), filepath.Join(dir, "out"),
		[]string{"REGISTRY_AUTH_FILE=" + auth}, d.SigningFlags()...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
