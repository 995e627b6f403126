package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containers/image/v5/types"
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/test/payload"
	"github.com/snofactory/snofactory/test/registry"
)

// benchPrecache measures, against one local registry holding the default synthetic payload:
// a cold precache (empty store, OCI layout out) against sequential `skopeo copy` of the same
// images into one OCI layout, and a warm precache (same store, second build) against the cold
// one.
func benchPrecache(ctx context.Context, dir string) ([]Result, error) {
	if _, err := exec.LookPath("skopeo"); err != nil {
		return nil, fmt.Errorf("skopeo is missing: install the Debian package skopeo (make deps)")
	}
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return nil, err
	}
	defer reg.Stop()
	rel, err := payload.Generate(ctx, reg.Addr(), payload.Options{})
	if err != nil {
		return nil, err
	}
	images := []precache.Image{{Name: "release", Ref: rel.PullSpec, Digest: rel.Digest}}
	for _, c := range rel.Components {
		images = append(images, precache.Image{Name: c.Name, Ref: c.PullSpec, Digest: c.Digest})
	}
	conf := filepath.Join(dir, "registries.conf.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(conf, "50-bench.conf"), []byte(fmt.Sprintf("[[registry]]\nlocation = %q\ninsecure = true\n", reg.Addr())), 0o644); err != nil {
		return nil, err
	}
	store, err := blobstore.Open(filepath.Join(dir, "store"))
	if err != nil {
		return nil, err
	}
	run := func(name string) (time.Duration, *precache.Report, error) {
		start := time.Now()
		res, err := precache.Precache(ctx, precache.Config{Images: images, Store: store, Sys: sysContext(conf)})
		if err != nil {
			return 0, nil, err
		}
		if _, err := res.WriteLayout(filepath.Join(dir, name), store); err != nil {
			return 0, nil, err
		}
		return time.Since(start), &res.Report, nil
	}
	cold, coldRep, err := run("cold")
	if err != nil {
		return nil, fmt.Errorf("cold precache: %w", err)
	}
	warm, warmRep, err := run("warm")
	if err != nil {
		return nil, fmt.Errorf("warm precache: %w", err)
	}
	if warmRep.BytesFetched != 0 {
		return nil, fmt.Errorf("warm precache fetched %d bytes", warmRep.BytesFetched)
	}

	start := time.Now()
	oci := filepath.Join(dir, "skopeo")
	for i, im := range images {
		cmd := exec.CommandContext(ctx, "skopeo", "copy", "--quiet", "--src-tls-verify=false",
			"docker://"+im.Ref, fmt.Sprintf("oci:%s:img%d", oci, i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("skopeo copy %s: %v\n%s", im.Ref, err, out)
		}
	}
	seq := time.Since(start)
	fmt.Fprintf(os.Stderr, "precache: %d images, %d unique blobs, %.1f MB; cold %.2fs (%.0f MB/s), warm %.3fs, skopeo sequential %.2fs\n",
		len(images), coldRep.Blobs, float64(coldRep.BytesTotal)/1e6, cold.Seconds(),
		float64(coldRep.BytesFetched)/1e6/cold.Seconds(), warm.Seconds(), seq.Seconds())
	return []Result{
		{Name: "precache-cold-vs-skopeo", Unit: "s", Ours: cold.Seconds(), Baseline: seq.Seconds(), Target: "ratio <= 0.5"},
		{Name: "precache-warm-vs-cold", Unit: "s", Ours: warm.Seconds(), Baseline: cold.Seconds(), Target: "ratio < 0.05"},
	}, nil
}

// sysContext reads registries (insecure flags) from dir only, never the host's files.
func sysContext(dir string) *types.SystemContext {
	return &types.SystemContext{SystemRegistriesConfPath: "/dev/null", SystemRegistriesConfDirPath: dir}
}
