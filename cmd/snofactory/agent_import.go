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
	var disk string
	var o imageimport.Options
	cmd := &cobra.Command{
		Use:   "import-images --disk DEVICE",
		Short: "Import the precached images from the factory's data disk into containers-storage",
		Long: `import-images copies each image of the precache data disk the factory VM was given (an
OCI image layout, every blob checked against its digest) into the node's containers-storage,
one image at a time straight off the disk. The store is the one the node's storage.conf
(below --root) describes, as CRI-O opens it; --graph-root, --run-root and --driver override
it. Where the node has SELinux, what was imported is relabeled (restorecon -R). Images
already there are skipped, so an interrupted import is finished by running it again. It
prints a JSON report: the images, the store, and the relabel or why it was skipped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if disk == "" {
				return badInput(fmt.Errorf("import-images needs --disk DEVICE: the precache data disk (e.g. /dev/disk/by-id/virtio-snofactory-precache)"))
			}
			if _, err := os.Stat(disk); err != nil {
				return badInput(fmt.Errorf("--disk %s: %w", disk, err))
			}
			o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			rep, err := imageimport.ImportDisk(cmd.Context(), disk, o)
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().StringVar(&disk, "disk", "", "the precache data disk (block device or file)")
	cmd.Flags().StringVar(&o.Root, "root", "/", "the node's root: its /etc/containers/storage.conf and /etc/selinux apply")
	cmd.Flags().StringVar(&o.ScratchDir, "scratch-dir", "/var/tmp", "where one image's layers are staged while it is written")
	cmd.Flags().StringVar(&o.GraphRoot, "graph-root", "", "containers-storage graph root (default: storage.conf's, below --root)")
	cmd.Flags().StringVar(&o.RunRoot, "run-root", "", "containers-storage run root (default: storage.conf's, below --root)")
	cmd.Flags().StringVar(&o.Driver, "driver", "", "storage driver (default: storage.conf's; vfs where overlay cannot mount)")
	return cmd
}
