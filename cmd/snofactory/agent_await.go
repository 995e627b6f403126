package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
)

func newAgentAwaitCommand() *cobra.Command {
	var (
		port, stateDir, sealRequest string
		details                     []string
	)
	cmd := &cobra.Command{
		Use:   "await [--detail k=v]... --seal-request FILE",
		Short: "Tell the factory host this node takes a command, and print the one it sends",
		Long: `await reports ` + wire.PhaseAwaiting + ` (its details say how the previous command went) and
waits, with the port held open, for the factory host's answer: one of ` + strings.Join([]string{wire.CommandFreeze,
			wire.CommandThaw, wire.CommandReport, wire.CommandSeal, wire.CommandPoweroff}, ", ") + `. It prints the
command's name; a seal command's request is written to --seal-request (0600) for agent seal.
This is how a node the factory keeps running from install to seal learns what comes next.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sealRequest == "" {
				return badInput(fmt.Errorf("await needs --seal-request FILE: where a seal command's request goes"))
			}
			d, err := reportDetails(details, nil, "", "", "")
			if err != nil {
				return err
			}
			if len(d) == 0 {
				d = nil
			}
			// No deadline: the host decides when the next command comes (the validation of
			// an OpenShift node waits for its cluster to settle).
			c, err := agent.Reporter{Port: port, StateDir: stateDir}.Await(cmd.Context(), d)
			if err != nil {
				return err
			}
			if c.Seal != nil {
				if err := agent.SaveSealRequest(sealRequest, c.Seal); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.Name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&details, "detail", nil, "key=value detail (repeatable): how the previous command went")
	f.StringVar(&sealRequest, "seal-request", "", "where a seal command's request is written")
	f.StringVar(&port, "port", "/dev/virtio-ports/"+wire.DefaultPortName, "virtio-serial port device or name")
	f.StringVar(&stateDir, "state-dir", agent.DefaultStateDir, "where the sequence counter lives (must be a tmpfs)")
	return cmd
}
