package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

// newAgentFactsCommand gathers what the host's validation checks need from the booted
// installed system and sends it as one report.
func newAgentFactsCommand() *cobra.Command {
	var (
		o              agent.FactsOptions
		port, stateDir string
		printFacts     bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "facts --root DIR [--ignition-config FILE] [--storage GRAPHROOT]",
		Short: "Send the installed system's facts (files, units, users, images, boot, disk, clock) to the factory host",
		Long: `facts observes the installed system under --root: the boot source, every file,
unit and user the Ignition config declares (modes, owners, sha256 of contents; never
contents or keys), the images in containers-storage, bootstrap leftovers, the disk layout
and free space, the clock and kubelet certificate lifetimes, and for the seed's SBOM the
installed OS packages (rpm where the root has an rpm database, else dpkg) and the
snofactory binaries on the node. It sends them as one "` + wire.PhaseFacts + `" report
for the host's validation gate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Root == "" {
				return badInput(fmt.Errorf("facts needs --root DIR: the installed system's root"))
			}
			f, err := agent.GatherFacts(cmd.Context(), o)
			if err != nil {
				return err
			}
			d, err := wire.FactsDetails(f)
			if err != nil {
				return err
			}
			if printFacts {
				if err := writeJSON(cmd.OutOrStdout(), f); err != nil {
					return fmt.Errorf("printing facts: %w", err)
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			r := agent.Reporter{Port: port, StateDir: stateDir}
			m, err := r.Report(ctx, wire.PhaseFacts, wire.StatusInfo, d)
			if err != nil {
				return err
			}
			packages := "no OS packages"
			if p := f.Packages; p != nil && p.Manager != "" {
				packages = fmt.Sprintf("%d %s packages", p.Total, p.Manager)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "reported %s (seq %d, %d files, %d units, %s)\n", m.Phase, m.Seq, len(f.Files), len(f.Units), packages)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Root, "root", "", "root of the installed system (the directory Ignition wrote to)")
	fl.StringVar(&o.BootDir, "boot-dir", "", "directory holding the first-boot stamp (default ROOT/boot)")
	fl.StringVar(&o.IgnitionConfig, "ignition-config", "", "describe every file, unit and user this Ignition config declares")
	fl.StringVar(&o.GraphRoot, "storage", "", "containers-storage graph root to list images from (none: images are not reported)")
	fl.StringVar(&o.RunRoot, "run-root", "/run/containers/storage", "containers-storage run root")
	fl.StringVar(&o.Driver, "driver", "overlay", "storage driver: overlay on a node, vfs where overlay cannot mount")
	fl.StringVar(&port, "port", "/dev/virtio-ports/"+wire.DefaultPortName, "virtio-serial port device or name")
	fl.StringVar(&stateDir, "state-dir", agent.DefaultStateDir, "where the sequence counter lives (must be a tmpfs)")
	fl.BoolVar(&printFacts, "print", false, "also print the facts as JSON on stdout")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up writing after this long")
	return cmd
}
