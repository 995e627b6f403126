package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/agent/wire"
	"github.com/snofactory/snofactory/seeds/ociseed"
	"github.com/snofactory/snofactory/seeds/seed"
	"github.com/snofactory/snofactory/stages/vm"
)

// seedBootFlags are the flags of seed boot.
type seedBootFlags struct {
	siteConfig  string
	forwards    []string
	memoryMiB   int
	cpus        int
	timeout     time.Duration
	hold        time.Duration
	accelerator string
	overlay     string
}

// newSeedBootCommand boots a seed as its site would: a VM with the seed's disk and the
// site-config medium, following the reconfiguration the seed reports.
func newSeedBootCommand(reg *registryFlags) *cobra.Command {
	var f seedBootFlags
	c := &cobra.Command{
		Use:   "boot REF|DIR [--site-config ISO] [--forward HOSTPORT:GUESTADDR:GUESTPORT]...",
		Short: "Boot a seed in a VM with a site-config medium, as at the site, and follow its reconfiguration",
		Long: `boot starts a VM on a copy-on-write overlay of the seed's disk (the seed is not changed),
attaches the site-config medium (made by snofactory site-config create) as a disk, and prints
each reconfiguration step the seed reports. It ends when the seed has booted reconfigured
(exit 0) or reports a failure (exit 1); --hold keeps the VM running that long afterwards
(Ctrl-C ends it) so forwarded services can be tried: --forward 8080:10.0.2.50:8080 sends
127.0.0.1:8080 to port 8080 of the address the site config gives the seed, on qemu's user
network (10.0.2.0/24, gateway 10.0.2.2, DNS 10.0.2.3).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			forwards, err := parseForwards(f.forwards)
			if err != nil {
				return badInput(err)
			}
			work, err := os.MkdirTemp("", "snofactory-seed-boot-")
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, os.RemoveAll(work)) }()
			dir := args[0]
			local, err := localSeed(dir)
			if err != nil {
				return err
			}
			if !local {
				if _, err := seedSourceLocation(dir, true); err != nil {
					return err
				}
				dir = filepath.Join(work, "seed")
				if _, err := ociseed.Pull(cmd.Context(), args[0], dir, reg.options()...); err != nil {
					return err
				}
			}
			return bootSeed(cmd.Context(), dir, work, forwards, f, cmd.OutOrStdout())
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.siteConfig, "site-config", "", "the site-config medium (an ISO from snofactory site-config create); none: the seed waits for it and reports that it is missing")
	fl.StringArrayVar(&f.forwards, "forward", nil, "HOSTPORT:GUESTADDR:GUESTPORT to forward from 127.0.0.1 (repeatable)")
	fl.IntVar(&f.memoryMiB, "memory", 1024, "VM memory in MiB")
	fl.IntVar(&f.cpus, "cpus", 1, "VM CPUs")
	fl.DurationVar(&f.timeout, "timeout", 15*time.Minute, "give up after this long (scaled under TCG)")
	fl.DurationVar(&f.hold, "hold", 0, "keep the reconfigured VM running this long (Ctrl-C ends it)")
	fl.StringVar(&f.accelerator, "accelerator", "auto", "auto, kvm or tcg")
	fl.StringVar(&f.overlay, "overlay", "", "keep the VM's disk (an overlay of the seed's) in this file and boot it again if it exists, as a machine keeps its disk across power cycles (default: a temporary one)")
	return c
}

// parseForwards reads HOSTPORT:GUESTADDR:GUESTPORT.
func parseForwards(specs []string) ([]vm.Forward, error) {
	var out []vm.Forward
	for _, s := range specs {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("--forward %q: want HOSTPORT:GUESTADDR:GUESTPORT, e.g. 8080:10.0.2.50:8080", s)
		}
		hp, err1 := strconv.Atoi(parts[0])
		gp, err2 := strconv.Atoi(parts[2])
		if err := errors.Join(err1, err2); err != nil || hp <= 0 || hp > 65535 || gp <= 0 || gp > 65535 {
			return nil, fmt.Errorf("--forward %q: ports must be numbers from 1 to 65535", s)
		}
		out = append(out, vm.Forward{HostPort: hp, GuestPort: gp, GuestAddr: parts[1]})
	}
	return out, nil
}

// bootSeed boots the seed in dir with an overlay in work and follows it.
func bootSeed(ctx context.Context, dir, work string, forwards []vm.Forward, f seedBootFlags, out io.Writer) error {
	// qemu opens the seed's qcow2 as the overlay's backing file: nothing in it may point
	// elsewhere on this host.
	m, err := seed.Check(dir)
	if err != nil {
		return badInput(err)
	}
	overlay := f.overlay
	if overlay == "" {
		overlay = filepath.Join(work, "boot.qcow2")
	}
	if _, err := os.Stat(overlay); errors.Is(err, os.ErrNotExist) {
		if err := seedOverlay(ctx, dir, m, overlay); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	acc, err := vm.Prober{Log: log}.Resolve(ctx, vm.Accel(f.accelerator))
	if err != nil {
		return badInput(err)
	}
	cfg := vm.Config{
		Name:       "seed",
		Disks:      []vm.Disk{{Path: overlay, Format: "qcow2", Serial: wire.TargetDiskSerial, BootIndex: 1}},
		CPUs:       f.cpus,
		MemoryMiB:  f.memoryMiB,
		Firmware:   vm.Firmware(m.Firmware),
		ConsoleLog: filepath.Join(work, "console.log"),
		Network:    &vm.UserNetwork{Forwards: forwards},
	}
	if f.siteConfig != "" {
		cfg.Disks = append(cfg.Disks, vm.Disk{Path: f.siteConfig, Format: "raw", ReadOnly: true, Serial: "site-config"})
	}
	fmt.Fprintf(out, "Booting seed %s (%s, %s) on %s\n", m.Name, m.Target, m.Firmware, acc.Name)
	machine, err := vm.Start(ctx, cfg, acc, log)
	if err != nil {
		return err
	}
	defer machine.Stop()
	if err := followSeed(ctx, machine, acc.Scale(f.timeout), cfg.ConsoleLog, out); err != nil {
		return err
	}
	return hold(ctx, machine, f.hold, forwards, out)
}

// seedOverlay makes a qcow2 overlay of the seed's disk: its qcow2, or its raw disk
// decompressed next to the overlay.
func seedOverlay(ctx context.Context, dir string, m *seed.Manifest, overlay string) error {
	base, format := "", ""
	for _, d := range m.Disks {
		if d.Format == seed.FormatQCOW2 {
			base, format = filepath.Join(dir, d.File), "qcow2"
		}
	}
	if base == "" {
		rc, err := seed.RawReader(ctx, dir, m.Disks[0])
		if err != nil {
			return err
		}
		defer rc.Close()
		base, format = filepath.Join(filepath.Dir(overlay), "disk.raw"), "raw"
		// 0600, as the overlay: after the first boot the disk holds the site's pull secret.
		f, err := os.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, rc)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("decompressing the seed's disk: %w", err)
		}
	}
	// 0600: the site's reconfiguration writes its pull secret into the overlay.
	return vm.CreateOverlay(ctx, base, format, overlay)
}

// followSeed prints the reconfiguration steps until the seed reports the outcome and, on
// success, has booted.
func followSeed(ctx context.Context, machine *vm.Machine, timeout time.Duration, console string, out io.Writer) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	show := func(msg wire.Message) {
		if msg.Phase != wire.PhaseReconfigureStep && msg.Phase != wire.PhaseReconfigured {
			return
		}
		keys := make([]string, 0, len(msg.Details))
		for k := range msg.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, msg.Details[k])
		}
		fmt.Fprintf(out, "  %-16s %-6s%s\n", msg.Phase, msg.Status, b.String())
	}
	if _, err := machine.WaitFinal(wctx, wire.PhaseReconfigured, show); err != nil {
		return fmt.Errorf("the seed's reconfiguration: %w (console: %s)", err, console)
	}
	if _, err := machine.WaitFinal(wctx, wire.PhaseBootComplete, show); err != nil {
		return fmt.Errorf("the reconfigured seed's boot: %w (console: %s)", err, console)
	}
	fmt.Fprintln(out, "Seed reconfigured and booted")
	return nil
}

// hold keeps the VM running for d, or until Ctrl-C, so its forwarded services can be used.
func hold(ctx context.Context, machine *vm.Machine, d time.Duration, forwards []vm.Forward, out io.Writer) error {
	if d <= 0 {
		return nil
	}
	for _, f := range forwards {
		fmt.Fprintf(out, "Forwarding 127.0.0.1:%d to %s:%d\n", f.HostPort, f.GuestAddr, f.GuestPort)
	}
	fmt.Fprintf(out, "Holding the VM for %s (Ctrl-C ends it)\n", d)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	case <-machine.Done():
		return errors.New("the seed's VM stopped while held")
	}
	return nil
}
