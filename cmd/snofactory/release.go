package main

import (
	"fmt"

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
			if err := textOrJSON("--output", output); err != nil {
				return err
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
				return writeJSON(cmd.OutOrStdout(), info)
			}
			return info.WriteText(cmd.OutOrStdout())
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
