package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/pipeline/versions"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print snofactory's version and the Go toolchain that built it",
		Long: `Version prints "snofactory VERSION" (the module version and, for a build from a
checkout, its VCS revision, with "+dirty" for uncommitted changes), then the Go version and
platform of the build. Run records carry the same version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "snofactory %s\n", versions.Self())
			fmt.Fprintf(out, "go %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
