package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// isoBenchSize is the size of the ISO the embed figures are measured on:
// real live ISOs are about 1 GiB, and copying one is the cost users know.
const isoBenchSize = 1 << 30

// benchISO measures embedding a config into a 1 GiB live ISO, in place and
// into a new file, against `cp` of the same ISO.
func benchISO(ctx context.Context, dir string) ([]Result, error) {
	for _, tool := range []string{"xorriso", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is needed (Debian package %s): %w", tool, map[string]string{"xorriso": "xorriso", "cp": "coreutils"}[tool], err)
		}
	}
	big, err := buildBigISO(ctx, dir)
	if err != nil {
		return nil, err
	}
	cfg := []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/bench","contents":{"source":"data:,bench"}}]}}`)
	copyPath := filepath.Join(dir, "copy.iso")

	syncFS := func() error {
		if out, err := exec.CommandContext(ctx, "sync").CombinedOutput(); err != nil {
			return fmt.Errorf("sync: %w: %s", err, out)
		}
		return nil
	}
	// Writing a gigabyte is dominated by page-cache writeback, so every timed
	// run starts from a synced disk, and cp and ours alternate.
	runCp := func() (time.Duration, error) {
		os.Remove(copyPath)
		if err := syncFS(); err != nil {
			return 0, err
		}
		start := time.Now()
		out, err := exec.CommandContext(ctx, "cp", big, copyPath).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("cp: %w: %s", err, out)
		}
		return time.Since(start), nil
	}
	outPath := filepath.Join(dir, "out.iso")
	runOurs := func(c coreiso.Customization, want coreiso.Strategy) (time.Duration, error) {
		os.Remove(outPath)
		os.Remove(copyPath)
		if err := syncFS(); err != nil {
			return 0, err
		}
		start := time.Now()
		rep, err := coreiso.Customize(ctx, big, outPath, c)
		if err != nil {
			return 0, err
		}
		if rep.Strategy != want {
			return 0, fmt.Errorf("strategy %s, want %s", rep.Strategy, want)
		}
		return time.Since(start), nil
	}
	var cps, outs, rebuilds []time.Duration
	bigCfg := oversizedConfig()
	for i := 0; i < 3; i++ {
		for _, step := range []struct {
			into *[]time.Duration
			run  func() (time.Duration, error)
		}{
			{&cps, runCp},
			{&outs, func() (time.Duration, error) {
				return runOurs(coreiso.Customization{Ignition: cfg}, coreiso.StrategyPatch)
			}},
			{&rebuilds, func() (time.Duration, error) {
				return runOurs(coreiso.Customization{Ignition: bigCfg}, coreiso.StrategyRebuild)
			}},
		} {
			d, err := step.run()
			if err != nil {
				return nil, err
			}
			*step.into = append(*step.into, d)
		}
	}
	os.Remove(outPath)
	cpTime, toFile, rebuild := medianOf(cps), medianOf(outs), medianOf(rebuilds)

	// in place: a copy of the ISO patched repeatedly (forced); cp's writes are
	// flushed first so they are not billed to the embed.
	if _, err := runCp(); err != nil {
		return nil, err
	}
	if err := syncFS(); err != nil {
		return nil, err
	}
	inPlace, err := median(5, func() (time.Duration, error) {
		start := time.Now()
		rep, err := coreiso.Customize(ctx, copyPath, "", coreiso.Customization{Ignition: cfg, Force: true})
		if err != nil {
			return 0, err
		}
		if rep.Strategy != coreiso.StrategyPatch {
			return 0, fmt.Errorf("unexpected strategy %s", rep.Strategy)
		}
		return time.Since(start), nil
	})
	if err != nil {
		return nil, err
	}
	got, err := coreiso.ShowIgnition(copyPath)
	if err != nil || string(got) != string(cfg) {
		return nil, fmt.Errorf("benchmark output does not read back: %v", err)
	}
	os.Remove(copyPath)

	return []Result{
		{Name: "iso-embed-inplace-1GiB", Unit: "s", Ours: inPlace.Seconds(), Baseline: cpTime.Seconds(), Target: "ratio < 0.01"},
		{Name: "iso-embed-output-1GiB", Unit: "s", Ours: toFile.Seconds(), Baseline: cpTime.Seconds(), Target: "ratio <= 1.2"},
		// the rebuild rewrites the image through xorriso: informational, no target
		{Name: "iso-embed-rebuild-1GiB", Unit: "s", Ours: rebuild.Seconds(), Baseline: cpTime.Seconds()},
	}, nil
}

// oversizedConfig is a valid config whose compressed initrd exceeds the
// 256 KiB embed area (incompressible data, like embedded certificates and
// manifests in a bootstrap-in-place config).
func oversizedConfig() []byte {
	raw := make([]byte, 512<<10)
	x := uint64(88172645463325252)
	for i := range raw {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		raw[i] = byte(x)
	}
	return []byte(`{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/opt/blob","contents":{"source":"data:;base64,` +
		base64.StdEncoding.EncodeToString(raw) + `"}}]}}`)
}

// buildBigISO grows the newest x86_64 fixture to about 1 GiB with a filler
// file, keeping its boot records and embed layout.
func buildBigISO(ctx context.Context, dir string) (string, error) {
	fixture, err := findFixture("embed-areas-2023-07.x86_64.iso.xz")
	if err != nil {
		return "", err
	}
	small := filepath.Join(dir, "small.iso")
	if err := unxzFile(fixture, small); err != nil {
		return "", err
	}
	filler := filepath.Join(dir, "filler.bin")
	if err := os.WriteFile(filler, nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Truncate(filler, isoBenchSize-(4<<20)); err != nil {
		return "", err
	}
	big := filepath.Join(dir, "big.iso")
	cmd := exec.CommandContext(ctx, "xorriso", "-indev", small, "-outdev", big,
		"-boot_image", "any", "replay", "-map", filler, "/filler.bin", "-end")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the 1 GiB ISO with xorriso: %w\n%s", err, out)
	}
	os.Remove(filler)
	os.Remove(small)
	return big, nil
}

// findFixture looks for shared/reference/coreos-installer-iso-fixtures/name
// above the working directory and the executable.
func findFixture(name string) (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			p := filepath.Join(d, "shared", "reference", "coreos-installer-iso-fixtures", name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
			d = filepath.Dir(d)
		}
	}
	return "", errors.New("shared/reference/coreos-installer-iso-fixtures not found above the working directory; run the bench from the checkout")
}

func unxzFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := xz.NewReader(in)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return fmt.Errorf("decompressing %s: %w", src, err)
	}
	return out.Close()
}

func medianOf(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// median runs f n times and returns the median duration.
func median(n int, f func() (time.Duration, error)) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		d, err := f()
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[n/2], nil
}
