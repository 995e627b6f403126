package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// passphraseEnv is where a key's passphrase comes from when no --passphrase-file is given.
const passphraseEnv = trust.PassphraseEnv

func newKeysCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "keys",
		Short: "Make the key pairs that sign seeds",
	}
	var passFile string
	gen := &cobra.Command{
		Use:   "generate PREFIX",
		Short: "Write a sigstore key pair: PREFIX.key (encrypted, 0600) and PREFIX.pub",
		Long: "The pair is in the format cosign, skopeo (--sign-by-sigstore-private-key) and podman use. " +
			"The passphrase comes from --passphrase-file FILE or the environment variable " + passphraseEnv +
			", never from a flag's value. An existing key is never overwritten.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pass, err := trust.Passphrase(passFile, passphraseEnv)
			if err != nil {
				return badInput(err)
			}
			if err := trust.GenerateKeys(args[0], pass, passFile); err != nil {
				return err // a refusal is exit 2 (badinput, output), a failed write exit 1
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s (private, encrypted) and %s (public)\n", trust.KeyFile(args[0]), trust.PubFile(args[0]))
			return nil
		},
	}
	gen.Flags().StringVar(&passFile, "passphrase-file", "", "read the passphrase from FILE (its first line)")
	c.AddCommand(gen)
	return c
}
