package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// CheckSiteMedium refuses a site-config medium (seed boot --site-config) that is not one: an
// ISO 9660 image labelled as the seed's hook looks for it. Callers check it before any pull
// or VM, since the seed would otherwise wait for a medium it cannot find until the boot
// timed out. An empty path is no medium.
func CheckSiteMedium(path string) error {
	if path == "" {
		return nil
	}
	if _, err := siteconfig.OpenMedium(path); err != nil {
		return badinput.Wrap(fmt.Errorf("--site-config: %w", err))
	}
	return nil
}

// SeedBoot is a seed booted as at its site (snofactory seed boot).
type SeedBoot struct {
	// Dir is the seed directory; Work a private directory for the VM's files.
	Dir, Work string
	// Overlay is the VM's disk, kept across boots as a machine keeps its disk ("": one in
	// Work, gone afterwards).
	Overlay string
	// SiteConfig is the site-config medium ("": none).
	SiteConfig string
	// Forwards are on the default NIC, on qemu's user network; NICs replace that NIC.
	Forwards        []Forward
	NICs            []NIC
	CPUs, MemoryMiB int
	// Timeout bounds the reconfiguration (scaled under TCG); Hold keeps the VM running
	// that long afterwards.
	Timeout, Hold time.Duration
	Accelerator   string
	// MachineSerial is the serial number the VM's firmware reports ("": none), which a
	// site-config medium may be bound to.
	MachineSerial string
	// Out gets the steps the seed reports.
	Out io.Writer
}

// Forward sends 127.0.0.1:HostPort to GuestAddr:GuestPort on the VM's user network.
type Forward struct {
	HostPort  int
	GuestAddr string
	GuestPort int
}

// BootSeed boots the seed with an overlay and follows its reconfiguration. A seed that is
// not sound is refused (seed.ErrBadSeed) before qemu opens it; an accelerator that cannot
// be had is the caller's input (*badinput.Error).
func BootSeed(ctx context.Context, b SeedBoot) error {
	// qemu opens the seed's qcow2 as the overlay's backing file: nothing in it may point
	// elsewhere on this host.
	m, err := seed.Check(b.Dir)
	if err != nil {
		return err
	}
	if len(b.NICs) > 0 && len(b.Forwards) > 0 {
		return badinput.Wrap(errors.New("forwards use the default NIC, which NICs replace: forward on a NIC of its own (a user netdev with hostfwd)"))
	}
	forwards := make([]vm.Forward, 0, len(b.Forwards))
	for _, fw := range b.Forwards {
		forwards = append(forwards, vm.Forward{HostPort: fw.HostPort, GuestAddr: fw.GuestAddr, GuestPort: fw.GuestPort})
	}
	overlay := b.Overlay
	if overlay == "" {
		overlay = filepath.Join(b.Work, "boot.qcow2")
	}
	if _, err := os.Stat(overlay); errors.Is(err, os.ErrNotExist) {
		if err := seedOverlay(ctx, b.Dir, m, overlay); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	acc, err := vm.Prober{Log: log}.Resolve(ctx, vm.Accel(b.Accelerator))
	if err != nil {
		return badinput.Wrap(err)
	}
	cfg := vm.Config{
		Name:         "seed",
		Disks:        []vm.Disk{{Path: overlay, Format: "qcow2", Serial: wire.TargetDiskSerial, BootIndex: 1}},
		CPUs:         b.CPUs,
		MemoryMiB:    b.MemoryMiB,
		Firmware:     vm.Firmware(m.Firmware),
		ConsoleLog:   filepath.Join(b.Work, "console.log"),
		SystemSerial: b.MachineSerial,
	}
	if len(b.NICs) == 0 {
		cfg.Network = &vm.UserNetwork{Forwards: forwards}
	}
	for _, n := range b.NICs {
		cfg.NICs = append(cfg.NICs, vm.NIC{Netdev: n.Netdev, MAC: n.MAC})
	}
	if b.SiteConfig != "" {
		cfg.Disks = append(cfg.Disks, vm.Disk{Path: b.SiteConfig, Format: "raw", ReadOnly: true, Serial: "site-config"})
	}
	fmt.Fprintf(b.Out, "Booting seed %s (%s, %s) on %s\n", m.Name, m.Target, m.Firmware, acc.Name)
	machine, err := vm.Start(ctx, cfg, acc, log)
	if err != nil {
		return err
	}
	defer machine.Stop()
	if err := followSeed(ctx, machine, acc.Scale(b.Timeout), cfg.ConsoleLog, b.Out); err != nil {
		return err
	}
	return hold(ctx, machine, b.Hold, forwards, b.Out)
}

// seedOverlay makes a qcow2 overlay of the seed's disk: its qcow2, or its raw disk
// (chunked or zstd) unpacked next to the overlay.
func seedOverlay(ctx context.Context, dir string, m *seed.Manifest, overlay string) error {
	base, format := "", ""
	for _, d := range m.Disks {
		if d.Format == seed.FormatQCOW2 {
			base, format = filepath.Join(dir, d.File), "qcow2"
		}
	}
	if base == "" {
		// Sparse, verified against the raw digest, 0600: after the first boot the disk
		// holds the site's pull secret.
		base, format = filepath.Join(filepath.Dir(overlay), "disk.raw"), "raw"
		if _, err := seed.WriteDevice(ctx, dir, base); err != nil {
			return fmt.Errorf("unpacking the seed's disk: %w", err)
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
		// boot-complete's details are what the node sees of its site once up (its
		// addresses, NICs, services): what a technician trying a site looks at.
		if msg.Phase != wire.PhaseReconfigureStep && msg.Phase != wire.PhaseReconfigured && msg.Phase != wire.PhaseBootComplete {
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
