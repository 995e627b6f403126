package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
	"github.com/snofactory/snofactory/seeds/site/credentials"
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
	return &cobra.Command{
		Use:   "validate SITE.yaml",
		Short: "Check a site config and report every problem in it",
		Long: `Validate reads a site config and the files it references. Every problem is printed on
stderr as FILE:LINE:COL: PATH: MESSAGE (with a hint where one helps), and the exit code is
2; a good file prints a one-line summary on stdout.`,
		Args: oneSiteConfig,
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := loadSiteConfig(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %s\n", args[0], siteSummary(sc))
			return nil
		},
	}
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
			// Before anything is made: a device is written in place, a directory, a
			// character device, a read-only file or the site config itself is refused.
			block, err := output.Check(out, args[0])
			if err != nil {
				return outputErr("site-config create", err)
			}
			rcpts, err := credentials.ParseRecipients(recipients)
			if err != nil {
				return badInput(err)
			}
			sealRcpts, err := ageRecipients(sealTo)
			if err != nil {
				return badInput(err)
			}
			// The key first: a wrong passphrase must leave nothing written.
			var signer *trust.Signer
			if signBy != "" {
				if signer, err = siteSigner(signBy, passFile); err != nil {
					return err
				}
			} else if cmd.Flags().Changed("passphrase-file") {
				return badInput(errors.New("site-config create: --passphrase-file is for the key of --sign-by, which is not given"))
			}
			sc, err := loadSiteConfig(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			if err := sc.Bind(forSeed, serial); err != nil {
				return badInput(fmt.Errorf("site-config create: %w", err))
			}
			if len(rcpts) == 0 && sc.Spec.ClusterName != "" && sc.Spec.KubeadminPasswordHash == "" && !noKubeadmin {
				return badInput(fmt.Errorf("site-config create: %w; give --credentials-recipient KEY (an age or SSH public key), "+
					"or spec.kubeadminPasswordHash, or --no-kubeadmin", siteconfig.ErrNoCredentialsRecipient))
			}
			var written string
			if len(rcpts) > 0 {
				if credsOut == "" && block {
					return badInput(fmt.Errorf("site-config create: %s is a device; name the credentials file with --credentials-out FILE", out))
				}
				if credsOut == "" {
					credsOut = out + ".credentials.age"
				}
				creds, err := siteconfig.MakeCredentials(sc, nil, time.Now(), !noKubeadmin)
				if err != nil {
					return err
				}
				if err := writeSiteCredentials(credsOut, rcpts, creds); err != nil {
					return err
				}
				written = credsOut
			}
			if len(sealRcpts) > 0 {
				if err := sc.Seal(sealRcpts); err != nil {
					return badInput(fmt.Errorf("site-config create --seal-to: %w", err))
				}
			}
			inputs := []string{args[0]}
			if signBy != "" {
				inputs = append(inputs, signBy)
			}
			if err := siteconfig.WriteMedium(cmd.Context(), sc, out, siteconfig.MediumOptions{Signer: signer, Inputs: inputs}); err != nil {
				return outputErr("site-config create", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (volume %s)\n", out, siteSummary(sc), siteconfig.VolumeLabel)
			if signer != nil {
				pub, err := signer.PublicKey()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: signed by key %s\n", out, pub.Fingerprint)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", out, bindingSummary(sc.Spec.Binding))
			if written != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: the site's credentials, readable only by its recipients\n", written)
			}
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

// bindingSummary says where a medium may be applied.
func bindingSummary(b *siteconfig.Binding) string {
	if b == nil {
		return "not bound: any seed that trusts it takes it, on any machine (bind it with --for-seed and --for-serial)"
	}
	seed, machine := "any seed", "any machine"
	if b.Seed != "" {
		seed = "seed " + b.Seed
	}
	if b.MachineSerial != "" {
		machine = "the machine with serial number " + b.MachineSerial
	}
	return "bound to " + seed + " on " + machine
}

// ageRecipients parses --seal-to: age X25519 recipients, what a seed's identity opens.
func ageRecipients(keys []string) ([]age.Recipient, error) {
	var out []age.Recipient
	for _, k := range keys {
		r, err := age.ParseX25519Recipient(k)
		if err != nil {
			return nil, fmt.Errorf("--seal-to %.24q: not an age recipient (age1..., as age-keygen -y prints it): %w", k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// siteSigner loads the --sign-by key of site-config create; a missing passphrase or a wrong
// one is the user's to fix (exit 2).
func siteSigner(keyFile, passFile string) (*trust.Signer, error) {
	pass, err := trust.Passphrase(passFile, passphraseEnv)
	if err != nil {
		return nil, badInput(fmt.Errorf("site-config create --sign-by: %w", err))
	}
	s, err := trust.LoadSigner(keyFile, pass, "snofactory "+pipeline.SelfVersion())
	if err != nil {
		return nil, badInput(fmt.Errorf("site-config create --sign-by: %w", err))
	}
	return s, nil
}

// writeSiteCredentials seals the site's generated credentials to rcpts, 0600, staged and
// renamed so a failure leaves no partial file.
func writeSiteCredentials(path string, rcpts []age.Recipient, c *siteconfig.SiteCredentials) error {
	files := c.Files()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the site's credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := credentials.Seal(tmp, rcpts, files); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the site's credentials: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

func oneSiteConfig(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return badInput(fmt.Errorf("site-config: name one site config file, got %d arguments", len(args)))
	}
	return nil
}

// outputErr makes a refused output path the user's input (exit 2).
func outputErr(what string, err error) error {
	if output.IsRefused(err) {
		return badInput(fmt.Errorf("%s: %w", what, err))
	}
	return err
}

// loadSiteConfig loads a site config, printing its problems (all of them) on stderr.
func loadSiteConfig(stderr io.Writer, path string) (*siteconfig.SiteConfig, error) {
	sc, err := siteconfig.Load(path)
	var ve *strictyaml.ValidationErrors
	switch {
	case errors.As(err, &ve):
		fmt.Fprintln(stderr, ve.Error())
		return nil, badInput(fmt.Errorf("site config %s is invalid", path))
	case err != nil:
		return nil, fmt.Errorf("loading the site config %s: %w", path, err)
	}
	return sc, nil
}

// siteSummary says what the site config sets, in one line, never the pull secret.
func siteSummary(sc *siteconfig.SiteConfig) string {
	s := sc.Spec
	ifaces := 0
	if s.Network != nil {
		ifaces = len(s.Network.Interfaces)
	}
	sum := fmt.Sprintf("site %s, hostname %s, %d interfaces, %d DNS servers, pull secret %s, %d mirrors, %d manifests",
		sc.Metadata.Name, s.Hostname, ifaces, len(sc.EffectiveDNS().Servers), map[bool]string{true: "yes", false: "no"}[s.PullSecret != ""],
		len(s.RegistryMirrors), len(s.Manifests))
	if s.SealedSecrets != "" {
		sum += ", secrets sealed"
	}
	return sum
}
