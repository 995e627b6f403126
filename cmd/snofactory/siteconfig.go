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

	"github.com/snofactory/snofactory/blueprints/strictyaml"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/credentials"
	"github.com/snofactory/snofactory/seeds/siteconfig"
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
		out, credsOut string
		recipients    []string
		noKubeadmin   bool
	)
	cmd := &cobra.Command{
		Use:   "create SITE.yaml -o site.iso [--credentials-recipient KEY]...",
		Short: "Write the site-config medium (an ISO 9660 image) for a site config",
		Long: fmt.Sprintf(`Create validates a site config and writes its medium: an ISO 9660 image labelled %s
holding the site config with its referenced files inlined. The image is mode 0600 when it
carries a pull secret. Problems are reported as by validate, with exit code 2.

`+siteconfig.CredentialsHelp, siteconfig.VolumeLabel),
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
			sc, err := loadSiteConfig(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
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
			if err := siteconfig.Write(cmd.Context(), sc, out, args[0]); err != nil {
				return outputErr("site-config create", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (volume %s)\n", out, siteSummary(sc), siteconfig.VolumeLabel)
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
	return cmd
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
	return fmt.Sprintf("site %s, hostname %s, %d interfaces, %d DNS servers, pull secret %s, %d mirrors, %d manifests",
		sc.Metadata.Name, s.Hostname, ifaces, len(sc.EffectiveDNS().Servers), map[bool]string{true: "yes", false: "no"}[s.PullSecret != ""],
		len(s.RegistryMirrors), len(s.Manifests))
}
