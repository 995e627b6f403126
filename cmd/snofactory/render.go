package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/stages"
	"github.com/spf13/cobra"
)

func newRenderCommand() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "render FILE -o DIR",
		Short: "Write the Ignition configs and manifests a blueprint renders to, for inspection",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput(fmt.Errorf("render needs -o DIR: where to write the configs"))
			}
			bp, err := blueprints.LoadFile(args[0])
			if err != nil {
				return badInput(err)
			}
			if err := output.CheckDir("-o", out, append([]string{args[0]}, bp.Resolved.Inputs()...)...); err != nil {
				return badInput(err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", out, err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			if err := stages.Render(cmd.Context(), bp, out, log); err != nil {
				return err
			}
			abs, _ := filepath.Abs(out)
			fmt.Fprintf(cmd.OutOrStdout(), "rendered %s into %s\n", bp.Metadata.Name, abs)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "directory to write into (created if missing)")
	return c
}
