package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/snofactory/snofactory/stages/liveiso"
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

	cpTime, err := median(3, func() (time.Duration, error) {
		os.Remove(copyPath)
		start := time.Now()
		out, err := exec.CommandContext(ctx, "cp", big, copyPath).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("cp: %w: %s", err, out)
		}
		return time.Since(start), nil
	})
	if err != nil {
		return nil, err
	}

	// in place: the ISO copied above is the one we patch, repeatedly (forced).
	// Flush cp's writes first so they are not billed to the embed.
	if out, err := exec.CommandContext(ctx, "sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sync: %w: %s", err, out)
	}
	inPlace, err := median(5, func() (time.Duration, error) {
		start := time.Now()
		rep, err := liveiso.Customize(ctx, copyPath, "", liveiso.Customization{Ignition: cfg, Force: true})
		if err != nil {
			return 0, err
		}
		if rep.Strategy != liveiso.StrategyPatch {
			return 0, fmt.Errorf("unexpected strategy %s", rep.Strategy)
		}
		return time.Since(start), nil
	})
	if err != nil {
		return nil, err
	}
	os.Remove(copyPath)

	outPath := filepath.Join(dir, "out.iso")
	toFile, err := median(3, func() (time.Duration, error) {
		os.Remove(outPath)
		start := time.Now()
		if _, err := liveiso.Customize(ctx, big, outPath, liveiso.Customization{Ignition: cfg}); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	})
	if err != nil {
		return nil, err
	}
	got, err := liveiso.ShowIgnition(outPath)
	if err != nil || string(got) != string(cfg) {
		return nil, fmt.Errorf("benchmark output does not read back: %v", err)
	}
	os.Remove(outPath)

	return []Result{
		{Name: "iso-embed-inplace-1GiB", Unit: "s", Ours: inPlace.Seconds(), Baseline: cpTime.Seconds(), Target: "ratio < 0.01"},
		{Name: "iso-embed-output-1GiB", Unit: "s", Ours: toFile.Seconds(), Baseline: cpTime.Seconds(), Target: "ratio <= 1.2"},
	}, nil
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
