package main

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

// newAgentSealCommand prepares the installed system for relocation at the seal stage's
// request and reports the steps.
func newAgentSealCommand() *cobra.Command {
	var (
		root, bootDir, request, port, stateDir, sys string
		output                                      string
		kind                                        oskind.Kind
		dryRun                                      bool
		timeout                                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "seal --root DIR [--request DEVICE] | seal --dry-run --target openshift|coreos [-o json]",
		Short: "Prepare the installed system for relocation, as the seal disk asks, and report each step",
		Long: `seal reads the request on the seal disk (serial ` + wire.SealDiskSerial + `), clears per-node state,
logs, the machine-id and SSH host keys, removes the build-time pull secret unless the
request keeps it, on OpenShift stops and disables kubelet and CRI-O and enables the
reconfiguration service, and marks the seed sealed (` + wire.SealedFile + `). It reports
"` + wire.PhaseSealed + `" with each step, or failed with the error.

On OpenShift it follows lifecycle-agent's seed creation: it reads the seed's identity from
the cluster's objects, replaces the build's pull secret through the API and waits for the
MCO to roll the placeholder out, stops kubelet, the containers, the pod sandboxes and CRI-O
in that order, runs the seed-time recert (force-expire, etcd defragmentation), and only then
removes files. --dry-run prints that list, each step with the command it runs and what it
changes, and touches nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				if kind == "" {
					return badInput(fmt.Errorf("--dry-run needs --target %s", oskind.Names()))
				}
				if err := textOrJSON("-o", output); err != nil {
					return err
				}
				req := wire.SealRequest{Version: wire.SealRequestVersion, Target: kind}
				if kind.IsOpenShift() {
					req.RecertImage, req.EtcdImage = "<recert image>", "<etcd image>"
				}
				plan := agent.Sealer{Root: cmp.Or(root, "/"), BootDir: bootDir, Request: req}.Plan()
				return steps.Print(cmd.OutOrStdout(), plan, output)
			}
			if root == "" {
				return badInput(fmt.Errorf("seal needs --root DIR: the installed system's root"))
			}
			if request == "" {
				dev, err := agent.DiskBySerial(sys, wire.SealDiskSerial)
				if err != nil {
					return err
				}
				request = dev
			}
			r := agent.Reporter{Port: port, StateDir: stateDir}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			steps, err := agent.SealFromRequest(ctx, root, bootDir, request)
			if err != nil {
				if _, rerr := r.Report(ctx, wire.PhaseSealed, wire.StatusFailed, map[string]string{wire.DetailError: err.Error()}); rerr != nil {
					return fmt.Errorf("%w (and reporting it failed: %v)", err, rerr)
				}
				return err
			}
			if _, err := r.Report(ctx, wire.PhaseSealed, wire.StatusOK, agent.SealDetails(steps)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "sealed (%d steps)\n", len(steps))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&root, "root", "", "root of the installed system")
	fl.StringVar(&bootDir, "boot-dir", "", "boot directory whose ignition/config.ign (the first-boot config) goes (none by default)")
	fl.StringVar(&request, "request", "", "the seal disk or a file holding the request (default: the disk with serial "+wire.SealDiskSerial+")")
	fl.StringVar(&sys, "sys", "/sys", "sysfs, where disks are found by serial")
	fl.StringVar(&port, "port", "/dev/virtio-ports/"+wire.DefaultPortName, "virtio-serial port device or name")
	fl.StringVar(&stateDir, "state-dir", agent.DefaultStateDir, "where the sequence counter lives (must be a tmpfs)")
	fl.DurationVar(&timeout, "timeout", 45*time.Minute, "give up after this long")
	fl.BoolVar(&dryRun, "dry-run", false, "print the steps the seal would take, in order, and touch nothing")
	fl.Var(&kind, "target", "with --dry-run: "+oskind.Names())
	fl.StringVarP(&output, "output", "o", "text", "with --dry-run: text or json")
	return cmd
}
