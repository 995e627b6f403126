package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/node/agent"
)

// newAgentRunUnitsCommand starts the enabled units of an installed root on a node without
// systemd (the conformance OS's first boot from disk).
func newAgentRunUnitsCommand() *cobra.Command {
	var root, logDir, failureLog string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "run-units --root DIR",
		Short: "Run the enabled systemd services of an installed root, on a node without systemd",
		Long: `run-units finds the services enabled under --root (Ignition's presets, .wants and
.requires links) and runs their ExecStartPre/ExecStart/ExecStartPost lines with sh -c,
chrooted into the root when it has a /bin/sh, in name order. Each unit's output goes to
--log-dir/NAME.log. It prints one line per unit (name, status, log) and exits non-zero at
the first unit whose command fails, after writing the tail of that unit's output to
--failure-log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if root == "" {
				return badInput(fmt.Errorf("run-units needs --root DIR"))
			}
			if st, err := os.Stat(root); err != nil || !st.IsDir() {
				return badInput(fmt.Errorf("--root %s: not a directory", root))
			}
			if logDir == "" {
				logDir = filepath.Join(root, "var/log/snofactory/units")
			}
			units, err := agent.EnabledUnits(root)
			if err != nil {
				return err
			}
			r := agent.UnitRunner{Root: root, LogDir: logDir, Grace: grace}
			results, runErr := r.Run(cmd.Context(), units)
			for _, res := range results {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", res.Unit, res.Status, res.Log)
			}
			if runErr != nil && failureLog != "" && len(results) > 0 {
				if err := agent.WriteFailureLog(failureLog, results[len(results)-1].Log); err != nil {
					return fmt.Errorf("%w (and writing --failure-log: %w)", runErr, err)
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&root, "root", "", "the installed root whose units to run")
	f.StringVar(&logDir, "log-dir", "", "where each unit's output goes (default ROOT/var/log/snofactory/units)")
	f.StringVar(&failureLog, "failure-log", "", "on failure, write the last 40 lines of the failing unit's output here")
	f.DurationVar(&grace, "grace", 2*time.Second, "how long a long-running service must survive to count as started")
	return cmd
}
