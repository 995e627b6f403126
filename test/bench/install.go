package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// bareBoots is how many bare boots the baseline is the median of.
const bareBoots = 3

// benchInstall runs the demo build through validate with the real snofactory binary on the
// conformance OS, and measures its install and validate stages against a bare qemu boot of
// the same live ISO to the guest's first phase report, under the accelerator the build used;
// the share of those stages' time spent waiting on the guest; and the VMs they started: one,
// since install hands its running VM on to validate.
func benchInstall(ctx context.Context, dir string) ([]Result, error) {
	bin, err := testbin.Binary(dir)
	if err != nil {
		return nil, err
	}
	b, err := runDemoBuild(ctx, bin, dir)
	if err != nil {
		return nil, err
	}
	vmStages := []string{"install", "validate"} // the stages the figures are about
	ours, err := stagesTime(b.rec, vmStages...)
	if err != nil {
		return nil, err
	}
	share, wait, err := guestWaitShare(b.events, b.rec, vmStages...)
	if err != nil {
		return nil, err
	}
	bare, acc, err := bareBootMedian(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	starts := vmStarts(b.events, vmStages...)
	fmt.Fprintf(os.Stderr, "install: accelerator %s; install+validate %.1fs in %d VM(s), of which %.1fs waiting on the guest; bare boot to the first phase report %.2fs (median of %d)\n",
		acc, ours.Seconds(), starts, wait.Seconds(), bare.Seconds(), bareBoots)
	return []Result{
		{Name: "install-validate-vs-bare-boot", Unit: "s", Ours: ours.Seconds(), Baseline: bare.Seconds()},
		{Name: "install-guest-wait-share", Ours: share, Baseline: 1},
		// One boot: install hands its VM on to validate. The baseline is the build before
		// that, in which validate booted the installed disk again.
		{Name: "install-validate-vm-starts", Ours: float64(starts), Baseline: 2, Target: "ours = 1 (install hands its VM to validate)"},
	}, nil
}

// demoBuild is what one build left: its blueprint, run record and event stream.
type demoBuild struct {
	blueprint string
	out       string // the output directory
	rec       *pipeline.Record
	events    []pipeline.Event
}

// runDemoBuild serves an extra image from a fresh registry (stopped when the build ends: only
// resolve and precache read it) and runs `snofactory build --until validate` on a copy of the
// demo blueprint naming it, with a fresh cache and JSON progress.
func runDemoBuild(ctx context.Context, bin, dir string) (*demoBuild, error) {
	reg, image, err := serveDemoImage(ctx)
	if err != nil {
		return nil, err
	}
	defer reg.Stop()
	b := &demoBuild{out: filepath.Join(dir, "out")}
	if b.blueprint, err = benchBlueprint(ctx, dir, image); err != nil {
		return nil, err
	}
	stderr, err := runBuild(ctx, bin, "build", b.blueprint, "--until", "validate",
		"--cache-dir", filepath.Join(dir, "cache"), "--output-dir", b.out, "--progress", "json")
	if err != nil {
		return nil, err
	}
	if b.events, err = parseEvents(stderr); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(b.out, pipeline.RecordFile))
	if err != nil {
		return nil, err
	}
	if b.rec, err = pipeline.ReadRecord(raw); err != nil {
		return nil, fmt.Errorf("reading %s: %w", pipeline.RecordFile, err)
	}
	return b, nil
}

// benchBlueprint copies the demo blueprint and its fragments into dir, pointed at the
// conformance ISO and at image instead of the demo's registry, and returns its path.
func benchBlueprint(ctx context.Context, dir, image string) (string, error) {
	iso, err := conformance.Cached(ctx, nil)
	if err != nil {
		return "", err
	}
	return testbin.CopyDemo(dir, map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + iso})
}

// runBuild runs snofactory and returns its stderr. An interrupt reaches it as SIGINT, so it
// stops its VMs itself; it dies with this process if that is killed outright.
func runBuild(ctx context.Context, bin string, args ...string) ([]byte, error) {
	return runBuildEnv(ctx, bin, nil, args...)
}

// runBuildEnv is runBuild with env (NAME=VALUE) added to snofactory's environment.
func runBuildEnv(ctx context.Context, bin string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		tail := stderr.Bytes()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return nil, fmt.Errorf("snofactory %s: %w\n%s", strings.Join(args, " "), err, tail)
	}
	return stderr.Bytes(), nil
}

// bareBootMedian boots the build's live ISO with plain qemu (the VM the build's install
// starts, without its disks) to the guest's first phase report, bareBoots times, under the
// accelerator the build recorded, and returns the median time.
func bareBootMedian(ctx context.Context, b *demoBuild, dir string) (time.Duration, string, error) {
	acc, err := buildAccel(b.rec)
	if err != nil {
		return 0, acc, err
	}
	spec, err := blueprints.LoadFile(b.blueprint)
	if err != nil {
		return 0, acc, err
	}
	boot := stages.ProbeBoot{
		ISO:         filepath.Join(b.out, "live-iso", "live.iso"),
		CPUs:        spec.Spec.VM.CPUs,
		MemoryMiB:   int(spec.Spec.VM.Memory.MiB()),
		Firmware:    spec.Spec.VM.Firmware,
		Accelerator: acc,
	}
	var ds []time.Duration
	for i := range bareBoots {
		boot.Name = fmt.Sprintf("bare-%d", i)
		boot.ConsoleLog = filepath.Join(dir, boot.Name+"-console.log")
		d, err := bareBoot(ctx, boot)
		if err != nil {
			return 0, acc, err
		}
		ds = append(ds, d)
	}
	return medianOf(ds), acc, nil
}

// buildAccel is the accelerator the build's install ran with (its run record's tool entry,
// "tcg (why)"): kvm is probed again when it boots, tcg is taken as is.
func buildAccel(rec *pipeline.Record) (string, error) {
	i := slices.IndexFunc(rec.Stages, func(s pipeline.StageRecord) bool { return s.Name == "install" })
	if i < 0 {
		return "", fmt.Errorf("%s has no install stage", pipeline.RecordFile)
	}
	name, _, _ := strings.Cut(rec.Stages[i].Tools["accelerator"], " ")
	if name == "" {
		return "", fmt.Errorf("%s: install recorded no accelerator", pipeline.RecordFile)
	}
	return name, nil
}

// bareBoot boots b and returns the time from the start to the guest's first agent
// message. The VM is stopped before it returns.
func bareBoot(ctx context.Context, b stages.ProbeBoot) (time.Duration, error) {
	start := time.Now()
	var first time.Duration
	if _, err := stages.Probe(ctx, b, func(wire.Message) bool {
		first = time.Since(start)
		return true
	}); err != nil {
		return 0, fmt.Errorf("no phase report: %w", err)
	}
	return first, nil
}

// demoBench is what the benchmarks that build the demo share: the snofactory binary, and
// the demo blueprint in dir naming its extra image in the registry that serves it (the
// caller stops it).
func demoBench(ctx context.Context, dir string) (bin, bp string, reg *registry.Registry, err error) {
	if bin, err = testbin.Binary(dir); err != nil {
		return "", "", nil, err
	}
	reg, image, err := serveDemoImage(ctx)
	if err != nil {
		return "", "", nil, err
	}
	if bp, err = benchBlueprint(ctx, dir, image); err != nil {
		reg.Stop()
		return "", "", nil, err
	}
	return bin, bp, reg, nil
}

// serveDemoImage starts a registry serving the demo's extra image (random bytes) and
// returns the registry, to stop, and the image's reference.
func serveDemoImage(ctx context.Context) (*registry.Registry, string, error) {
	reg, err := registry.Start(ctx, registry.Options{})
	if err != nil {
		return nil, "", err
	}
	image := reg.Ref(strings.TrimPrefix(testbin.DemoImage, testbin.DemoRegistry+"/"))
	if _, err := registry.PushRandom(ctx, image); err != nil {
		reg.Stop()
		return nil, "", err
	}
	return reg, image, nil
}
