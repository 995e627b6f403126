package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

// newAgentCommand is the on-node side of snofactory: the commands the factory VM (and
// later the shipped node) runs.
func newAgentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Commands run on the node itself: phase reporting to the factory host, image import, unit start-up",
	}
	cmd.AddCommand(newAgentReportCommand())
	cmd.AddCommand(newAgentAwaitCommand())
	cmd.AddCommand(newAgentImportCommand())
	cmd.AddCommand(newAgentFactsCommand())
	cmd.AddCommand(newAgentRunUnitsCommand())
	cmd.AddCommand(newAgentSealCommand())
	cmd.AddCommand(newAgentReconfigureCommand())
	return cmd
}

func newAgentReportCommand() *cobra.Command {
	var (
		phase, status, port, stateDir string
		filesRoot, ignitionConfig     string
		logFile                       string
		details, detailFiles          []string
		timeout                       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "report --phase PHASE --status start|ok|failed|info [--detail k=v]...",
		Short: "Send one phase report to the factory host over virtio-serial",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := reportDetails(details, detailFiles, logFile, ignitionConfig, filesRoot)
			if err != nil {
				return err
			}
			if len(d) == 0 {
				d = nil
			}
			st := wire.Status(status)
			if !st.Valid() {
				return badInput(fmt.Errorf("--status %q: want start, ok, failed or info", status))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			r := agent.Reporter{Port: port, StateDir: stateDir}
			m, err := r.Report(ctx, phase, st, d)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reported %s %s (seq %d)\n", m.Phase, m.Status, m.Seq)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&phase, "phase", "", "phase name, e.g. ignition-files or "+wire.PhaseBootComplete)
	f.StringVar(&status, "status", string(wire.StatusInfo), "start, ok, failed or info")
	f.StringArrayVar(&details, "detail", nil, "key=value detail (repeatable)")
	f.StringArrayVar(&detailFiles, "detail-file", nil, "key=path: send the file's sha256, size and (if short text) content (repeatable)")
	f.StringVar(&ignitionConfig, "ignition-config", "", "describe every file this Ignition config writes (sha256, size, and the content of short files others may read; private files are withheld)")
	f.StringVar(&logFile, "log", "", "send the last lines of this log file as the "+wire.DetailLog+" detail (for a failure)")
	f.StringVar(&filesRoot, "files-root", "/", "root the --ignition-config files were written under")
	f.StringVar(&port, "port", "/dev/virtio-ports/"+wire.DefaultPortName, "virtio-serial port device or name")
	f.StringVar(&stateDir, "state-dir", agent.DefaultStateDir, "where the sequence counter lives (must be a tmpfs)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up writing after this long")
	_ = cmd.MarkFlagRequired("phase")
	return cmd
}

// reportDetails gathers a report's details from its flags: key=value pairs, files, the
// tail of a log, and the files an Ignition config wrote.
func reportDetails(details, detailFiles []string, logFile, ignitionConfig, filesRoot string) (map[string]string, error) {
	d := map[string]string{}
	for _, kv := range details {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, badInput(fmt.Errorf("--detail %q: want key=value", kv))
		}
		d[k] = v
	}
	src := agent.DetailSources{Log: logFile, IgnitionConfig: ignitionConfig, FilesRoot: filesRoot}
	for _, kp := range detailFiles {
		k, p, ok := strings.Cut(kp, "=")
		if !ok || k == "" || p == "" {
			return nil, badInput(fmt.Errorf("--detail-file %q: want key=path", kp))
		}
		src.Files = append(src.Files, [2]string{k, p})
	}
	return d, agent.AddDetails(d, src)
}
