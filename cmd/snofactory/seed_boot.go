package main

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/stages"
)

// seedBootFlags are the flags of seed boot.
type seedBootFlags struct {
	siteConfig  string
	forwards    []string
	nics        []string
	memoryMiB   int
	cpus        int
	timeout     time.Duration
	hold        time.Duration
	accelerator string
	overlay     string
	serial      string
}

// newSeedBootCommand boots a seed as its site would: a VM with the seed's disk and the
// site-config medium, following the reconfiguration the seed reports.
func newSeedBootCommand(reg *registryFlags) *cobra.Command {
	var f seedBootFlags
	c := &cobra.Command{
		Use:   "boot REF|DIR [--site-config ISO] [--forward HOSTPORT:GUESTADDR:GUESTPORT]... [--nic NETDEV]...",
		Short: "Boot a seed in a VM with a site-config medium, as at the site, and follow its reconfiguration",
		Long: `boot starts a VM on a copy-on-write overlay of the seed's disk (the seed is not changed),
attaches the site-config medium (made by snofactory site-config create) as a disk, and prints
each reconfiguration step the seed reports. It ends when the seed has booted reconfigured
(exit 0) or reports a failure (exit 1); --hold keeps the VM running that long afterwards
(Ctrl-C ends it) so forwarded services can be tried: --forward 8080:10.0.2.50:8080 sends
127.0.0.1:8080 to port 8080 of the address the site config gives the seed, on qemu's user
network (10.0.2.0/24, gateway 10.0.2.2, DNS 10.0.2.3). --nic tap,ifname=tap0,script=no replaces
that NIC with virtio NICs on qemu netdevs (ens16, ens17, ...: docs/sites.md), e.g. a bond's two.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			forwards, nics, err := stages.CheckSeedBootInputs(f.siteConfig, f.forwards, f.nics)
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "snofactory-seed-boot-")
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, os.RemoveAll(work)) }()
			s, err := reg.open(cmd.Context(), args[0], seedref.WithStagingDir(filepath.Join(work, "seed")))
			if err != nil {
				return err
			}
			dir, _, err := s.Dir(cmd.Context())
			if err != nil {
				return err
			}
			return stages.BootSeed(cmd.Context(), stages.SeedBoot{
				Dir: dir, Work: work, Overlay: f.overlay, SiteConfig: f.siteConfig, Forwards: forwards, NICs: nics,
				CPUs: f.cpus, MemoryMiB: f.memoryMiB, Timeout: f.timeout, Hold: f.hold, Accelerator: f.accelerator,
				MachineSerial: f.serial, Out: cmd.OutOrStdout(),
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.siteConfig, "site-config", "", "the site-config medium (an ISO from snofactory site-config create); none: the seed waits for it and reports that it is missing")
	fl.StringArrayVar(&f.forwards, "forward", nil, "HOSTPORT:GUESTADDR:GUESTPORT to forward from 127.0.0.1 (repeatable)")
	fl.StringArrayVar(&f.nics, "nic", nil, "a virtio NIC on a qemu netdev (TYPE,OPTIONS[,mac=MAC], e.g. tap,ifname=tap0,script=no,downscript=no) in place of the user-network one (repeatable)")
	fl.IntVar(&f.memoryMiB, "memory", 1024, "VM memory in MiB")
	fl.IntVar(&f.cpus, "cpus", 1, "VM CPUs")
	fl.DurationVar(&f.timeout, "timeout", 15*time.Minute, "give up after this long (scaled under TCG)")
	fl.DurationVar(&f.hold, "hold", 0, "keep the reconfigured VM running this long (Ctrl-C ends it)")
	fl.StringVar(&f.accelerator, "accelerator", "auto", "auto, kvm or tcg")
	fl.StringVar(&f.serial, "machine-serial", "", "the serial number the VM's firmware reports, as the site's server would (a medium bound with --for-serial checks it)")
	fl.StringVar(&f.overlay, "overlay", "", "keep the VM's disk (an overlay of the seed's) in this file and boot it again if it exists, as a machine keeps its disk across power cycles (default: a temporary one)")
	return c
}
