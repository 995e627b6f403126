package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/stages"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// vmStages boot the installed disk.
var vmStages = []string{"install", "validate", "seal"}

// benchFactory measures the factory VM's boots: the demo built through seal in one build
// (install's VM runs on for validate and seal) against the same build as it ran before
// one VM per build (three builds, each stopping after one of those stages, so each boots
// the disk afresh), in stage time and in boots; then the sealed seed's reconfiguration at
// a site under the same accelerator, against a bare boot of the same seed to its first
// report.
func benchFactory(ctx context.Context, dir string) ([]Result, error) {
	bin, bp, reg, err := demoBench(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer reg.Stop()

	one := filepath.Join(dir, "one")
	one1, err := buildUntil(ctx, bin, bp, "seal", filepath.Join(dir, "cache-one"), one)
	if err != nil {
		return nil, err
	}
	ours, err := stagesTime(one1, vmStages...)
	if err != nil {
		return nil, err
	}
	oursBoots, err := countBoots(one, one1)
	if err != nil {
		return nil, err
	}
	var base time.Duration
	baseBoots := 0
	var where []string
	for _, until := range vmStages {
		out := filepath.Join(dir, "three-"+until)
		rec, err := buildUntil(ctx, bin, bp, until, filepath.Join(dir, "cache-three"), out)
		if err != nil {
			return nil, err
		}
		d, err := stagesTime(rec, until)
		if err != nil {
			return nil, err
		}
		n, err := countBoots(out, rec)
		if err != nil {
			return nil, err
		}
		base, baseBoots = base+d, baseBoots+n
		o, err := stagesTime(one1, until)
		if err != nil {
			return nil, err
		}
		where = append(where, fmt.Sprintf("%s %.1fs vs %.1fs", until, o.Seconds(), d.Seconds()))
	}
	note := "per stage, one VM vs three: " + strings.Join(where, ", ") +
		"; no target: the one VM saves boots, and a boot of the tiny conformance OS costs seconds against install's minute in the guest, so the ratio is bounded by install/(install+2 boots) whatever the product does (the saving per boot line has the target)"
	fmt.Fprintf(os.Stderr, "factory: install+validate+seal %.1fs in one VM (%d boots), %.1fs in three builds (%d boots)\n",
		ours.Seconds(), oursBoots, base.Seconds(), baseBoots)

	edge, bare, err := benchEdge(ctx, bin, dir, filepath.Join(one, "seal", "seed"), one1)
	if err != nil {
		return nil, err
	}
	change, err := benchOneFileChange(ctx, bin, dir, bp, filepath.Join(dir, "cache-one"), filepath.Join(one, "seal", "seed"), reg)
	if err != nil {
		return nil, err
	}
	return []Result{
		change,
		{Name: "factory-install-validate-seal-one-vm-vs-three", Unit: "s", Ours: ours.Seconds(), Baseline: base.Seconds(), Note: note},
		savedPerBoot(ours, base, oursBoots, baseBoots, bare),
		{Name: "factory-boots-per-build", Ours: float64(oursBoots), Baseline: float64(baseBoots), Target: "ours = 2 (live ISO, installed disk)"},
		{Name: "edge-reconfigure-vs-bare-seed-boot", Unit: "s", Ours: edge.Seconds(), Baseline: bare.Seconds(), Target: "ours < 60 s"},
	}, nil
}

// savedPerBoot is the stage time one factory VM saves per boot it avoids, against a bare
// boot of the sealed seed to its first report: what each avoided boot should save.
func savedPerBoot(ours, base time.Duration, oursBoots, baseBoots int, bare time.Duration) Result {
	r := Result{Name: "factory-one-vm-saving-per-avoided-boot-vs-bare-boot", Unit: "s", Baseline: bare.Seconds(),
		Target: "ratio >= 0.5", Note: fmt.Sprintf("%d boots instead of %d", oursBoots, baseBoots)}
	if avoided := baseBoots - oursBoots; avoided > 0 {
		r.Ours = (base - ours).Seconds() / float64(avoided)
	}
	return r
}

// benchOneFileChange rebuilds the demo after changing one Butane file (its message of the
// day) and pushes the first seed, then the rebuilt one, to reg: the second push sends only
// the chunks that changed, against the whole seed's bytes.
func benchOneFileChange(ctx context.Context, bin, dir, bp, cache, first string, reg *registry.Registry) (Result, error) {
	motd := filepath.Join(filepath.Dir(bp), "demo", "motd.bu")
	b, err := os.ReadFile(motd)
	if err != nil {
		return Result{}, err
	}
	changed := strings.Replace(string(b), "from the demo blueprint.", "from the demo blueprint, rebuilt after one change.", 1)
	if changed == string(b) {
		return Result{}, fmt.Errorf("%s no longer says what the bench changes", motd)
	}
	if err := os.WriteFile(motd, []byte(changed), 0o644); err != nil {
		return Result{}, err
	}
	rebuilt := filepath.Join(dir, "rebuilt")
	if _, err := buildUntil(ctx, bin, bp, "seal", cache, rebuilt); err != nil {
		return Result{}, err
	}
	if _, err := ociseed.Push(ctx, first, reg.Ref("demo/seed:1")); err != nil {
		return Result{}, err
	}
	res, err := ociseed.Push(ctx, filepath.Join(rebuilt, "seal", "seed"), reg.Ref("demo/seed:2"))
	if err != nil {
		return Result{}, err
	}
	return Result{Name: "one-file-change-push-bytes-vs-full-seed", Unit: "MiB", Ours: float64(res.Sent) / (1 << 20),
		Baseline: float64(res.Bytes) / (1 << 20), Target: "ratio <= 0.10"}, nil
}

// buildUntil runs one build with a cache and output directory and returns its record.
func buildUntil(ctx context.Context, bin, bp, until, cache, out string) (*pipeline.Record, error) {
	return buildUntilEnv(ctx, bin, bp, until, cache, out, nil)
}

// buildUntilEnv is buildUntil with env (NAME=VALUE) added to the build's environment and
// flags added to its command line.
func buildUntilEnv(ctx context.Context, bin, bp, until, cache, out string, env []string, flags ...string) (*pipeline.Record, error) {
	args := append([]string{"build", bp, "--until", until, "--cache-dir", cache, "--output-dir", out, "--progress", "plain"}, flags...)
	if _, err := runBuildEnv(ctx, bin, env, args...); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(out, pipeline.RecordFile))
	if err != nil {
		return nil, err
	}
	return pipeline.ReadRecord(raw)
}

// countBoots is how many times the build booted a machine: each VM its stages started
// (their logs say "starting VM"), and once more for install's, which boots the live ISO
// and then the disk it installed.
func countBoots(out string, rec *pipeline.Record) (int, error) {
	logs, err := filepath.Glob(filepath.Join(out, "logs", "*.log"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return 0, err
		}
		n += strings.Count(string(b), `msg="starting VM"`)
	}
	for _, s := range rec.Stages {
		if s.Name == "install" && s.Cache == "miss" {
			n++
		}
	}
	return n, nil
}

// benchEdge boots the sealed seed as a site does, with the demo's site-config medium, and
// times it from the command's start to "Seed reconfigured and booted"; the baseline is a
// bare boot of the same seed disk to its first report, under the build's accelerator.
func benchEdge(ctx context.Context, bin, dir, seedDir string, rec *pipeline.Record) (edge, bare time.Duration, err error) {
	root, err := testbin.RepoRoot()
	if err != nil {
		return 0, 0, err
	}
	iso := filepath.Join(dir, "site.iso")
	if out, err := exec.CommandContext(ctx, bin, "site-config", "create", filepath.Join(root, "blueprints", "demo", "site.yaml"), "-o", iso).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("site-config create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "seed", "boot", seedDir, "--site-config", iso, "--hold", "1h")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt) // ends the hold; seed boot stops its VM
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Seed reconfigured and booted") {
			edge = time.Since(start)
			break
		}
	}
	if edge == 0 {
		return 0, 0, fmt.Errorf("seed boot ended before the seed reconfigured")
	}
	acc, err := buildAccel(rec)
	if err != nil {
		return 0, 0, err
	}
	bare, err = bareSeedBoot(ctx, dir, seedDir, acc)
	return edge, bare, err
}

// bareSeedBoot boots an overlay of the seed's disk, no medium, to the guest's first
// report.
func bareSeedBoot(ctx context.Context, dir, seedDir, acc string) (time.Duration, error) {
	m, err := seed.ReadManifest(seedDir)
	if err != nil {
		return 0, err
	}
	// The seed's raw disk, unpacked as seed boot does, under an overlay.
	base := filepath.Join(dir, "bare-seed.raw")
	if _, err := seed.WriteDevice(ctx, seedDir, base); err != nil {
		return 0, err
	}
	defer os.Remove(base)
	overlay := filepath.Join(dir, "bare-seed.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw",
		"-b", base, overlay).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	defer os.Remove(overlay)
	return bareBoot(ctx, stages.ProbeBoot{Name: "bare-seed", Disk: overlay, CPUs: 1, MemoryMiB: 1024,
		Firmware: m.Firmware, Accelerator: acc, ConsoleLog: filepath.Join(dir, "bare-seed-console.log")})
}
