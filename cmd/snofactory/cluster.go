package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
		kubeconfig, profile, output string
		wait                        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check --kubeconfig FILE [--profile BLUEPRINT] [-o text|json] [--wait DURATION]",
		Short: "Run validate's OpenShift checks against any running cluster",
		Long: `check runs the same OpenShift checks as the validate stage (ClusterVersion, every
ClusterOperator settled, the Node Ready, no pending CSRs, single-node topology, the master
pool updated, certificate lifetimes, ...) against the cluster the kubeconfig reaches, so a
cluster built some other way can be held to the same gate. --profile takes a blueprint's
validation settings (skipped checks, certificate window). --wait first waits up to that long
for the cluster to settle. Exit 0 when every error-level check passes, 1 otherwise, 2 on bad
usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return badInput(errors.New("cluster check needs --kubeconfig FILE"))
			}
			if _, err := os.Stat(kubeconfig); err != nil {
				return badInput(fmt.Errorf("--kubeconfig: %w", err))
			}
			if output != "text" && output != "json" {
				return badInput(fmt.Errorf("-o %q: want text or json", output))
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
			rep, err := validate.ClusterCheck(cmd.Context(), &validate.OpenShift{Kubeconfig: kubeconfig}, opts, skip, wait)
			if err != nil {
				var unknown *validate.UnknownSkipError
				if errors.As(err, &unknown) {
					return badInput(err)
				}
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				for _, r := range rep.Results {
					fmt.Fprintln(out, r.Line())
				}
				fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", rep.Summary.Passed, rep.Summary.Failed, rep.Summary.Skipped)
			}
			if rep.Failed() {
				return errChecksFailed
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to check")
	fl.StringVar(&profile, "profile", "", "a blueprint whose validation settings apply (skips, certificate window)")
	fl.StringVarP(&output, "output", "o", "text", "text or json")
	fl.DurationVar(&wait, "wait", 0, "wait up to this long for the cluster to settle before checking")
	return cmd
}
