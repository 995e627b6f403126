package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
)

// newISOCommand groups the live ISO customization commands (what
// `coreos-installer iso` does), over stages/liveiso/coreiso.
func newISOCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "iso",
		Short: "Embed Ignition configs, network keyfiles and kernel arguments in a CoreOS-style live ISO",
	}
	cmd.AddCommand(newISOEmbedCommand(), newISOShowCommand(), newISORemoveCommand(), newISOKargsCommand())
	return cmd
}

// oneISO requires exactly one ISO argument; a wrong count is bad input (exit 2).
func oneISO(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return badInput(fmt.Errorf("want exactly one ISO path, got %d arguments", len(args)))
	}
	return nil
}

// isoErr maps library errors to exit codes: the user's input (missing file,
// not an ISO, no embed area, refused replacement) exits 2.
func isoErr(err error) error {
	if err != nil && coreiso.IsBadInput(err) {
		return badInput(err)
	}
	return err
}

func newISOEmbedCommand() *cobra.Command {
	var (
		config, out string
		force       bool
		keyfiles    []string
		noRebuild   bool
	)
	cmd := &cobra.Command{
		Use:   "embed -i CONFIG [-o OUT] [-f] ISO",
		Short: "Embed an Ignition config (and NetworkManager keyfiles) into a live ISO",
		Long: `Embed an Ignition config into the live ISO's embed area, in place or into a new
file with -o. A config too large for the area is embedded by rebuilding the ISO
around a larger images/ignition.img (needs xorriso) unless --no-rebuild.`,
		Args: oneISO,
		RunE: func(cmd *cobra.Command, args []string) error {
			if config == "" {
				return badInput(fmt.Errorf("missing -i CONFIG (an Ignition config file, or - for stdin)"))
			}
			cfg, err := coreiso.ReadIgnition(cmd.Context(), config, cmd.InOrStdin())
			if err != nil {
				return badInput(err)
			}
			c := coreiso.Customization{Ignition: cfg, Force: force, NoRebuild: noRebuild,
				Log: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))}
			if c.NetworkKeyfiles, err = coreiso.ReadKeyfiles(keyfiles); err != nil {
				return badInput(err)
			}
			if err := outputFile("-o", out, append([]string{args[0], config}, keyfiles...)...); err != nil {
				return err
			}
			rep, err := coreiso.Customize(cmd.Context(), args[0], out, c)
			if err != nil {
				return isoErr(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "embedded %d-byte config as a %d-byte payload into %s (%s, area %d bytes)\n",
				rep.ConfigBytes, rep.PayloadBytes, rep.Output, rep.Strategy, rep.AreaBytes)
			return nil
		},
	}
	cmd.Flags().StringVarP(&config, "ignition-file", "i", "", "Ignition config to embed (- for stdin)")
	outputFlag(cmd, &out)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "replace an already embedded config")
	cmd.Flags().StringArrayVar(&keyfiles, "network-keyfile", nil, "NetworkManager keyfile to embed (repeatable)")
	cmd.Flags().BoolVar(&noRebuild, "no-rebuild", false, "fail instead of rebuilding the ISO when the config does not fit")
	return cmd
}

func newISOShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show ISO",
		Short: "Print the embedded Ignition config",
		Args:  oneISO,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := coreiso.ShowIgnition(args[0])
			if err != nil {
				return isoErr(err)
			}
			_, err = cmd.OutOrStdout().Write(cfg)
			return err
		},
	}
}

func newISORemoveCommand() *cobra.Command {
	return newISOChangeCommand("remove [-o OUT] ISO", "Remove the embedded Ignition config",
		coreiso.Customization{RemoveIgnition: true})
}

// newISOChangeCommand is a command that applies the fixed customization c to
// an ISO, in place or into a new file with -o.
func newISOChangeCommand(use, short string, c coreiso.Customization) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  oneISO,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFile("-o", out, args[0]); err != nil {
				return err
			}
			_, err := coreiso.Customize(cmd.Context(), args[0], out, c)
			return isoErr(err)
		},
	}
	outputFlag(cmd, &out)
	return cmd
}

// outputFlag adds -o/--output: a new file to write instead of changing the ISO in place.
func outputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "", "write the result to this file instead of changing ISO in place")
}

func newISOKargsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kargs",
		Short: "Show or change the live ISO's kernel arguments",
	}
	var defaults bool
	show := &cobra.Command{
		Use:   "show [--default] ISO",
		Short: "Print the current (or default) kernel arguments",
		Args:  oneISO,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := coreiso.ShowKargs(args[0], defaults)
			if err != nil {
				return isoErr(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), k)
			return nil
		},
	}
	show.Flags().BoolVarP(&defaults, "default", "d", false, "show the ISO's original kernel arguments")

	var (
		appendArgs, deleteArgs, replaceArgs []string
		modOut                              string
	)
	modify := &cobra.Command{
		Use:   "modify [-a KARG]... [-d KARG]... [-r KEY=OLD=NEW]... [-o OUT] ISO",
		Short: "Append, delete or replace kernel arguments",
		Args:  oneISO,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(appendArgs)+len(deleteArgs)+len(replaceArgs) == 0 {
				return badInput(fmt.Errorf("nothing to do: give -a, -d or -r"))
			}
			rep, err := coreiso.Customize(cmd.Context(), args[0], modOut, coreiso.Customization{
				KargsAppend: appendArgs, KargsDelete: deleteArgs, KargsReplace: replaceArgs})
			if err != nil {
				return isoErr(err)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "kernel arguments:", rep.Kargs)
			return nil
		},
	}
	modify.Flags().StringArrayVarP(&appendArgs, "append", "a", nil, "kernel argument to append (repeatable)")
	modify.Flags().StringArrayVarP(&deleteArgs, "delete", "d", nil, "kernel argument to delete (repeatable)")
	modify.Flags().StringArrayVarP(&replaceArgs, "replace", "r", nil, "KEY=OLD=NEW (or FLAG=NEWFLAG) replacement (repeatable)")
	outputFlag(modify, &modOut)

	reset := newISOChangeCommand("reset [-o OUT] ISO", "Restore the default kernel arguments",
		coreiso.Customization{ResetKargs: true})

	cmd.AddCommand(show, modify, reset)
	return cmd
}
