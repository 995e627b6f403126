package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/stages"
	"github.com/snofactory/snofactory/stages/validate"
)

func newClusterCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Work with a running OpenShift cluster"}
	cmd.AddCommand(newClusterCheckCommand())
	return cmd
}

// errChecksFailed is a check run whose error-level checks did not all pass (exit 1).
var errChecksFailed = errors.New("cluster check: checks failed")

func newClusterCheckCommand() *cobra.Command {
	var (
		access, profile, output string
		wait                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check --" + validate.ClusterAccessFlag + " FILE [--profile BLUEPRINT] [-o text|json] [--wait DURATION]",
		Short: "Run validate's OpenShift checks against any running cluster",
		Long:  validate.ClusterCheckHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if access == "" {
				return badInput(fmt.Errorf("cluster check needs --%s FILE", validate.ClusterAccessFlag))
			}
			// Read once up front: a FIFO, a device or a huge file is the caller's mistake (exit
			// 2), found before any check starts.
			if _, err := validate.ReadKubeconfig(access); err != nil {
				return badInput(fmt.Errorf("--%s: %w", validate.ClusterAccessFlag, err))
			}
			if err := textOrJSON("-o", output); err != nil {
				return err
			}
			var (
				skip map[string]string
				opts validate.Options
			)
			if profile != "" {
				bp, err := blueprints.LoadFile(profile)
				if err != nil {
					return badInput(err)
				}
				skip, opts = stages.ClusterCheckProfile(bp)
			}
			rep, err := validate.ClusterCheck(cmd.Context(), &validate.OpenShift{Kubeconfig: access}, opts, skip, wait)
			if err != nil {
				var unknown *validate.UnknownSkipError
				if errors.As(err, &unknown) {
					return badInput(err)
				}
				return err
			}
			if output == "json" {
				err = writeJSON(cmd.OutOrStdout(), rep)
			} else {
				err = rep.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if rep.Failed() {
				return errChecksFailed
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&access, validate.ClusterAccessFlag, "", "the file that reaches the cluster to check, as oc reads it")
	fl.StringVar(&profile, "profile", "", "a blueprint whose validation settings apply (skips, certificate window)")
	fl.StringVarP(&output, "output", "o", "text", "text or json")
	fl.DurationVar(&wait, "wait", 0, "wait up to this long for the cluster to settle before checking")
	return cmd
}
