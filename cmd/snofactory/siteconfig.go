package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/site/fit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

func newSiteConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "site-config",
		Short: "Check site configs and write the site-config medium a seed boots with",
	}
	cmd.AddCommand(newSiteConfigValidateCommand(), newSiteConfigCreateCommand())
	return cmd
}

func newSiteConfigValidateCommand() *cobra.Command {
	var seedRef string
	cmd := &cobra.Command{
		Use:   "validate SITE.yaml [--seed REF]",
		Short: "Check a site config and report every problem in it",
		Long: `Validate reads a site config and the files it references. Every problem is printed on
stderr as FILE:LINE:COL: PATH: MESSAGE (with a hint where one helps), and the exit code is
2; a good file prints a one-line summary on stdout. With --seed REF (a seed directory or
reference; only its manifest is read), a site the seed cannot serve (IP families, FIPS,
proxy, seed version) exits 2 too, each problem naming both values and the fix.`,
		Args: oneSiteConfig,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := siteconfig.LoadReported(cmd.ErrOrStderr(), args[0])
			if err == nil && seedRef != "" {
				err = fit.CheckRef(cmd.Context(), seedRef, sc)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %s\n", args[0], sc.Summary())
			return nil
		},
	}
	cmd.Flags().StringVar(&seedRef, "seed", "", "also check that this seed (directory or reference) can serve the site")
	return cmd
}

func newSiteConfigCreateCommand() *cobra.Command {
	var (
		out, credsOut    string
		recipients       []string
		noKubeadmin      bool
		signBy, passFile string
		sealTo           []string
		forSeed, serial  string
	)
	cmd := &cobra.Command{
		Use:   "create SITE.yaml -o site.iso [--sign-by KEY] [--for-seed NAME] [--for-serial SERIAL] [--credentials-recipient KEY]...",
		Short: "Write the site-config medium (an ISO 9660 image) for a site config",
		Long: fmt.Sprintf(`Create validates a site config and writes its medium: an ISO 9660 image labelled %s
holding the site config with its referenced files inlined. The image is mode 0600 when it
carries a pull secret. Problems are reported as by validate, with exit code 2.

--sign-by KEY (a private key from snofactory keys generate, or cosign's) signs the medium:
%s, the signature of %s exactly as the hook reads it (the site config with its pull
secret and manifests inlined), as cosign sign-blob makes it. A seed whose blueprint names
spec.relocation.siteConfigKeys accepts only a medium signed by one of them. The key's
passphrase comes from --passphrase-file FILE or the environment variable %s. Check a
medium without snofactory: mount it, then cosign verify-blob --key KEY.pub --signature
%[2]s %[3]s.

--seal-to RECIPIENT (an age public key, age1..., repeatable) seals the site's secrets: the
pull secret, the kubeadmin password hash and the signer keys recert keeps go on the medium
only age-encrypted to it (spec.sealedSecrets), so a lost medium does not leak them. The seed
opens them with the identity its blueprint names (spec.relocation.siteConfigIdentity); its
recipient is what age-keygen -y IDENTITY prints.

--for-seed NAME and --for-serial SERIAL bind the medium (spec.binding): the seed refuses it
unless it is the seed named NAME (seed inspect shows the name) on the machine whose
firmware reports SERIAL (the chassis label; dmidecode -s system-serial-number). With
--sign-by the binding is signed too, so a medium made for one site is refused at another.

`+siteconfig.CredentialsHelp, siteconfig.VolumeLabel, siteconfig.SignatureFileName, siteconfig.ConfigFileName, passphraseEnv),
		Args: oneSiteConfig,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput(errors.New("site-config create: name the medium with -o site.iso"))
			}
			res, err := siteconfig.Create(cmd.Context(), siteconfig.CreateOptions{
				Config: args[0], Output: out, Recipients: recipients, CredentialsOut: credsOut, NoKubeadmin: noKubeadmin,
				SealTo: sealTo, SignBy: signBy, PassphraseFile: passFile, PassphraseEnv: passphraseEnv,
				PassphraseFileGiven: cmd.Flags().Changed("passphrase-file"), Creator: "snofactory " + versions.Self(),
				ForSeed: forSeed, ForSerial: serial,
			})
			if err != nil {
				return siteconfig.Reported(cmd.ErrOrStderr(), args[0], err)
			}
			res.WriteText(cmd.OutOrStdout(), out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", "the ISO image to write")
	fl.StringArrayVar(&recipients, "credentials-recipient", nil, siteconfig.RecipientHelp)
	fl.StringVar(&credsOut, "credentials-out", "", "where the sealed credentials go (default OUTPUT.credentials.age)")
	fl.BoolVar(&noKubeadmin, "no-kubeadmin", false, "make no kubeadmin password: the site's kubeadmin secret is deleted")
	fl.StringArrayVar(&sealTo, "seal-to", nil, "seal the site's secrets to this age recipient (age1..., the seed's identity's; repeatable)")
	fl.StringVar(&forSeed, "for-seed", "", "bind the medium to the seed of this name (spec.binding.seed)")
	fl.StringVar(&serial, "for-serial", "", "bind the medium to the machine with this serial number (spec.binding.machineSerial)")
	fl.StringVar(&signBy, "sign-by", "", "sign the medium with this private key (PREFIX.key from snofactory keys generate)")
	fl.StringVar(&passFile, "passphrase-file", "", "read the --sign-by key's passphrase from FILE (its first line); default: $"+passphraseEnv)
	return cmd
}

func oneSiteConfig(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return badInput(fmt.Errorf("site-config: name one site config file, got %d arguments", len(args)))
	}
	return nil
}
