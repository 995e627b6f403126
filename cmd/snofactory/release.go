package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	units "github.com/docker/go-units"

	"github.com/containers/image/v5/docker/reference"
	"github.com/snofactory/snofactory/stages/resolve"
	"github.com/spf13/cobra"
)

func newReleaseCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "release",
		Short: "Inspect OpenShift release payloads",
	}
	c.AddCommand(newReleaseInfoCommand())
	return c
}

func newReleaseInfoCommand() *cobra.Command {
	var (
		output, arch, authFile, registriesConf string
		insecure                               []string
		jobs                                   int
	)
	c := &cobra.Command{
		Use:   "info REF",
		Short: "Show a release's version, component count and unique blob bytes",
		Long: "Resolve a release image, read its image-references and size every component's blobs " +
			"(each distinct blob once: what precache fetches into an empty depot store).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return badInput(fmt.Errorf("--output %q: want text or json", output))
			}
			if _, err := reference.ParseDockerRef(args[0]); err != nil {
				return badInput(fmt.Errorf("%q is not an image reference: %w", args[0], err))
			}
			info, err := resolve.Describe(cmd.Context(), resolve.InfoRequest{Ref: args[0], Arch: arch, AuthFile: authFile,
				RegistriesConf: registriesConf, Insecure: insecure, Jobs: jobs})
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Release:\t%s\n", info.Ref)
			fmt.Fprintf(tw, "Digest:\t%s\n", info.Digest)
			fmt.Fprintf(tw, "Version:\t%s\n", info.Version)
			fmt.Fprintf(tw, "Components:\t%d\n", info.Components)
			fmt.Fprintf(tw, "Unique blobs:\t%d (%s)\n", info.UniqueBlobs, releaseBytes(info.UniqueBlobBytes))
			fmt.Fprintf(tw, "Blobs per image, summed:\t%s\n", releaseBytes(info.TotalBlobBytes))
			if info.ISO != nil {
				fmt.Fprintf(tw, "Live ISO (%s):\t%s\n", info.Arch, info.ISO.URL)
			}
			if info.Installer != "" {
				fmt.Fprintf(tw, "Installer:\t%s\n", info.Installer)
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	c.Flags().StringVar(&arch, "arch", "", "node architecture (x86_64, aarch64, ...; default x86_64)")
	c.Flags().StringSliceVar(&insecure, "insecure-registry", nil, "registry host[:port] reached over plain HTTP or without TLS verification (repeatable)")
	c.Flags().StringVar(&authFile, "authfile", "", "auth file (pull secret); default: the standard containers/docker auth files")
	c.Flags().StringVar(&registriesConf, "registries-conf", "", "registries.conf to use instead of the system one (mirrors)")
	c.Flags().IntVar(&jobs, "jobs", 8, "manifests fetched in parallel")
	return c
}

// releaseBytes prints a byte count in binary units, and exactly.
func releaseBytes(n int64) string {
	return fmt.Sprintf("%s (%d bytes)", units.BytesSize(float64(n)), n)
}
