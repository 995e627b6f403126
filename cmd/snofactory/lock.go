package main

import (
	"fmt"
	"log/slog"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/stages"
	"github.com/spf13/cobra"
)

func newLockCommand() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "lock FILE",
		Short: "Resolve everything a blueprint reads to digests and write the lock file",
		Long: `Lock pins the release image, its component images, the live ISO, the installer and
every extra image to a digest, and writes them to FILE.lock.json beside the blueprint (or -o).
Same lock, same inputs: "snofactory build --locked" refuses to build if anything would
resolve differently.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bp, err := blueprints.LoadFile(args[0])
			if err != nil {
				return badInput(err)
			}
			if out == "" {
				out = blueprints.LockPath(args[0])
			}
			// The lock may not land on the blueprint or on any file it names.
			inputs := append([]string{args[0]}, bp.Resolved.Inputs()...)
			if err := outputFile("-o", out, inputs...); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			n, err := stages.Lock(cmd.Context(), bp, out, log, inputs...)
			if err != nil {
				return fmt.Errorf("resolving %s: %w", bp.Metadata.Name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "locked %d images of %s in %s\n", n, bp.Metadata.Name, out)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "lock file to write (default FILE.lock.json beside the blueprint)")
	return c
}
