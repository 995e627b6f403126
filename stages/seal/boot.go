package seal

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// seal seals the node and returns its disk, powered off cleanly: the factory VM an
// earlier stage of this build handed on, asked to seal, or else a boot of its own.
func seal(ctx context.Context, opts Options, in inputs, req wire.SealRequest, env *pipeline.Env) (string, error) {
	sess := env.TakeSession()
	if sess == nil {
		work := filepath.Join(env.Scratch, "seal.qcow2")
		return work, sealDisk(ctx, opts, in, req, work, env)
	}
	fac := sess.Value.(*vm.Factory)
	env.Log.Info("sealing the node left running", "console", fac.Console)
	if err := fac.Do(ctx, wire.Command{Name: wire.CommandSeal, Seal: &req}); err != nil {
		return "", err
	}
	if err := waitSealed(ctx, opts, req, fac.Machine, fac.Accel, fac.Console, env); err != nil {
		return "", err
	}
	// The overlay names the installed disk where install staged it; the cache entry is
	// where it is now. Only the header changes: the data is the same.
	if err := qemuImg(ctx, "rebase", "-u", "-F", in.install.Out.Format, "-b", in.install.Path(in.install.Out.Disk), fac.Disk); err != nil {
		return "", err
	}
	return fac.Disk, nil
}

// sealDisk boots a copy-on-write overlay of the installed disk at work with the seal
// request disk attached, waits for the node's sealed report and for the node to power
// itself off: a clean shutdown, so the disk is consistent when it is converted.
func sealDisk(ctx context.Context, opts Options, in inputs, req wire.SealRequest, work string, env *pipeline.Env) error {
	p := opts.Prober
	p.Log = env.Log
	acc, err := p.Resolve(ctx, vm.Accel(opts.Accelerator))
	if err != nil {
		return err
	}
	if err := vm.CreateOverlay(ctx, in.install.Path(in.install.Out.Disk), in.install.Out.Format, work); err != nil {
		return err
	}
	reqDisk := filepath.Join(env.Scratch, "seal-request.img")
	b, err := wire.EncodeSealRequest(req)
	if err != nil {
		return err
	}
	if err := os.WriteFile(reqDisk, b, 0o600); err != nil {
		return err
	}
	cfg := vm.Config{
		Name: "seal",
		Disks: []vm.Disk{
			{Path: work, Format: "qcow2", Serial: wire.TargetDiskSerial, Discard: true},
			{Path: reqDisk, Format: "raw", ReadOnly: true, Serial: wire.SealDiskSerial},
		},
		CPUs:       opts.CPUs,
		MemoryMiB:  opts.MemoryMiB,
		Firmware:   vm.Firmware(in.install.Out.Firmware),
		ConsoleLog: filepath.Join(env.RunDir, "logs", Name+"-console.log"),
	}
	// An OpenShift node takes the agent that seals it off the precache data disk, as its
	// install did, and keeps it for the reconfiguration at the site.
	if req.Target == oskind.OpenShift && in.precache.Out.DataDisk != "" {
		cfg.Disks = append(cfg.Disks, vm.Disk{Path: in.precache.Path(in.precache.Out.DataDisk), Format: "raw", ReadOnly: true, Serial: wire.PrecacheDiskSerial})
	}
	m, err := vm.StartManaged(ctx, cfg, acc, env.Log, env)
	if err != nil {
		return err
	}
	return waitSealed(ctx, opts, req, m, acc, cfg.ConsoleLog, env)
}

// waitSealed follows the node's seal to its report and its power-off.
func waitSealed(ctx context.Context, opts Options, req wire.SealRequest, m *vm.Machine, acc vm.Accelerator, console string, env *pipeline.Env) error {
	timeout := opts.BootTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if req.Target == oskind.OpenShift {
		// The node waits for its API and the MCO's rollout, and runs recert, before it reports.
		timeout += cmp.Or(opts.ClusterTimeout, 30*time.Minute)
	}
	wctx, cancel := context.WithTimeout(ctx, acc.Scale(timeout))
	defer cancel()
	msgs, err := m.WaitFinal(wctx, wire.PhaseSealed, nil)
	if err != nil {
		return fmt.Errorf("sealing the node: %w (console: %s)", err, console)
	}
	for _, msg := range msgs {
		if msg.Phase == wire.PhaseSealed {
			env.Log.Info("node sealed", "steps", len(msg.Details))
		}
	}
	return waitPoweroff(ctx, m, acc, console)
}

// waitPoweroff confirms the clean shutdown: the node powers off by itself after its report.
func waitPoweroff(ctx context.Context, m *vm.Machine, acc vm.Accelerator, console string) error {
	select {
	case <-m.Done():
		return nil
	case <-time.After(acc.Scale(60 * time.Second)):
		return fmt.Errorf("the node reported it was sealed but did not power off within %s: its disk may not be clean (console: %s)", acc.Scale(60*time.Second), console)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// qemuImgVersion is the first line of qemu-img --version, for the manifest's tools.
func qemuImgVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("qemu-img --version: %w", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(strings.TrimSpace(line), "qemu-img version "), nil
}
