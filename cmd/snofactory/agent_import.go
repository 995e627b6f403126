package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/node/imageimport"
)

// newAgentImportCommand imports the precache data disk into the node's container storage, so
// the sealed seed carries every image and the site never pulls them.
func newAgentImportCommand() *cobra.Command {
	var disk, scratch, graphRoot, runRoot, driver string
	cmd := &cobra.Command{
		Use:   "import-images --disk DEVICE",
		Short: "Import the precached images from the factory's data disk into containers-storage",
		Long: `import-images reads the precache data disk the factory VM was given (an OCI image layout,
every blob checked against its digest), and copies each image into the node's
containers-storage. Images already there are skipped, so a restarted import resumes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if disk == "" {
				return badInput(fmt.Errorf("import-images needs --disk DEVICE: the precache data disk (e.g. /dev/disk/by-id/virtio-precache)"))
			}
			if _, err := os.Stat(disk); err != nil {
				return badInput(fmt.Errorf("--disk %s: %w", disk, err))
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			got, err := imageimport.ImportDisk(cmd.Context(), disk, scratch, imageimport.Options{GraphRoot: graphRoot, RunRoot: runRoot, Driver: driver, Log: log})
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), got)
		},
	}
	cmd.Flags().StringVar(&disk, "disk", "", "the precache data disk (block device or file)")
	cmd.Flags().StringVar(&scratch, "scratch-dir", "/var/tmp", "where the layout is unpacked while importing")
	cmd.Flags().StringVar(&graphRoot, "graph-root", "/var/lib/containers/storage", "containers-storage graph root")
	cmd.Flags().StringVar(&runRoot, "run-root", "/run/containers/storage", "containers-storage run root")
	cmd.Flags().StringVar(&driver, "driver", "overlay", "storage driver: overlay on a node, vfs where overlay cannot mount")
	return cmd
}
