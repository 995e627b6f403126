package stages

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// ProbeBoot is a machine booted outside a build, the way the stages boot the factory VM:
// a live ISO, or a disk with the target serial.
type ProbeBoot struct {
	Name string
	// ISO is a live ISO to boot; Disk (format DiskFormat, default qcow2) is a disk,
	// written to through an overlay the caller made.
	ISO, Disk, DiskFormat string
	// Firmware is bios (default) or uefi; Accelerator auto (default), kvm or tcg.
	Firmware, Accelerator string
	CPUs, MemoryMiB       int
	// NoReboot makes a guest reboot end qemu.
	NoReboot   bool
	ConsoleLog string
	// Timeout bounds the whole boot at KVM speed (scaled under TCG; default 2 minutes).
	Timeout time.Duration
}

// Probe boots b and hands each report of the node's agent to onMessage, in order, until
// onMessage returns true; then the machine stops. It returns the accelerator it ran on.
// It serves what checks or measures a build's products from outside a build: the bench's
// baselines, a boot test of a built live ISO.
func Probe(ctx context.Context, b ProbeBoot, onMessage func(wire.Message) bool) (string, error) {
	acc, err := vm.Prober{Log: slog.New(slog.DiscardHandler)}.Resolve(ctx, vm.Accel(b.Accelerator))
	if err != nil {
		return "", err
	}
	cfg := vm.Config{Name: b.Name, ISO: b.ISO, CPUs: b.CPUs, MemoryMiB: b.MemoryMiB, Firmware: vm.Firmware(b.Firmware),
		NoReboot: b.NoReboot, ConsoleLog: b.ConsoleLog}
	if b.Disk != "" {
		format := b.DiskFormat
		if format == "" {
			format = "qcow2"
		}
		cfg.Disks = []vm.Disk{{Path: b.Disk, Format: format, Serial: wire.TargetDiskSerial, BootIndex: 1}}
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, acc.Scale(timeout))
	defer cancel()
	m, err := vm.Start(ctx, cfg, acc, slog.New(slog.DiscardHandler))
	if err != nil {
		return string(acc.Name), err
	}
	defer m.Stop()
	for {
		select {
		case <-ctx.Done():
			return string(acc.Name), fmt.Errorf("vm %s: %w (console: %s)", b.Name, ctx.Err(), b.ConsoleLog)
		case ev, ok := <-m.Events():
			switch {
			case !ok || ev.Exited:
				return string(acc.Name), fmt.Errorf("vm %s exited: %w (console: %s)", b.Name, errors.Join(vm.ErrExited, ev.ExitErr), b.ConsoleLog)
			case ev.Message != nil && onMessage(*ev.Message):
				return string(acc.Name), nil
			}
		}
	}
}
