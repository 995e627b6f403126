package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/seeds/ociseed"
	"github.com/snofactory/snofactory/seeds/seed"
	"github.com/snofactory/snofactory/seeds/target"
	"github.com/snofactory/snofactory/test/registry"
)

// benchSeedSize is the bench seed's raw disk: random, so nothing compresses it away.
const benchSeedSize = 512 << 20

// benchPublish measures pushing a seed: ours (parallel chunks) against `skopeo copy` of the
// same OCI artifact from a layout into an empty registry, and a re-push of the unchanged
// seed (every blob already there) against the first push.
func benchPublish(ctx context.Context, dir string) ([]Result, error) {
	if _, err := exec.LookPath("skopeo"); err != nil {
		return nil, fmt.Errorf("skopeo is missing: install the Debian package skopeo (make deps)")
	}
	seedDir := filepath.Join(dir, "seed")
	if err := writeBenchSeed(ctx, seedDir); err != nil {
		return nil, err
	}
	layout := filepath.Join(dir, "layout")
	if _, err := ociseed.Push(ctx, seedDir, ociseed.TransportLayout+":"+layout+":1.0"); err != nil {
		return nil, err
	}
	ours, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return nil, err
	}
	defer ours.Stop()
	start := time.Now()
	if _, err := ociseed.Push(ctx, seedDir, ours.Ref("seeds/bench:1.0")); err != nil {
		return nil, err
	}
	first := time.Since(start)
	start = time.Now()
	res, err := ociseed.Push(ctx, seedDir, ours.Ref("seeds/bench:1.0"))
	if err != nil {
		return nil, err
	}
	again := time.Since(start)
	if res.Sent != 0 {
		return nil, fmt.Errorf("the re-push sent %d bytes", res.Sent)
	}

	base, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return nil, err
	}
	defer base.Stop()
	start = time.Now()
	cmd := exec.CommandContext(ctx, "skopeo", "copy", "--quiet", "--dest-tls-verify=false",
		"oci:"+layout+":1.0", "docker://"+base.Ref("seeds/bench:1.0"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("skopeo copy: %v\n%s", err, out)
	}
	skopeo := time.Since(start)
	return []Result{
		{Name: "publish-push-vs-skopeo-copy", Unit: "s", Ours: first.Seconds(), Baseline: skopeo.Seconds(), Target: "ratio <= 1.2"},
		{Name: "publish-repush-unchanged-vs-first-push", Unit: "s", Ours: again.Seconds(), Baseline: first.Seconds(), Target: "ratio < 0.5 (it still hashes the whole seed to prove it unchanged)"},
	}, nil
}

// writeBenchSeed writes a seed of a random raw disk, stored as raw+zstd.
func writeBenchSeed(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw := filepath.Join(dir, "disk.raw")
	f, err := os.Create(raw)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, benchSeedSize); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "zstd", "-q", "-1", "-T0", "--rm", raw, "-o", filepath.Join(dir, "disk.raw.zst")).CombinedOutput(); err != nil {
		return fmt.Errorf("zstd: %v: %s", err, out)
	}
	d, err := seed.DescribeDisk(ctx, dir, "disk.raw.zst", seed.FormatRaw)
	if err != nil {
		return err
	}
	m := &seed.Manifest{
		SchemaVersion: seed.SchemaVersion, Name: "bench", Target: target.CoreOS, Firmware: seed.FirmwareBIOS,
		BlueprintDigest: d.RawDigest, LockDigest: d.RawDigest, ReconfigurationAPIVersion: "snofactory.io/v1alpha1",
		Created: time.Unix(0, 0).UTC(), Tools: map[string]string{"bench": "1"}, Images: []seed.Image{}, Disks: []seed.Disk{d},
	}
	return seed.WriteManifest(dir, m)
}
