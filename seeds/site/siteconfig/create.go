package siteconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
	"github.com/snofactory/snofactory/seeds/site/credentials"
)

// CreateOptions say how Create makes a site's medium.
type CreateOptions struct {
	// Config is the site config file; Output the medium (an ISO image or a device).
	Config, Output string
	// Recipients read the site's generated credentials (age or SSH public keys), sealed into
	// CredentialsOut (default Output.credentials.age); NoKubeadmin makes no kubeadmin
	// password.
	Recipients     []string
	CredentialsOut string
	NoKubeadmin    bool
	// SealTo are the age recipients the site's secrets are sealed to on the medium.
	SealTo []string
	// SignBy is the private key that signs the medium, opened with the passphrase of
	// PassphraseFile, else of the environment variable PassphraseEnv; Creator names the
	// signing tool. PassphraseFileGiven says a passphrase file was named at all: without
	// SignBy, that is a mistake.
	SignBy, PassphraseFile, PassphraseEnv, Creator string
	PassphraseFileGiven                            bool
	// ForSeed and ForSerial bind the medium to a seed and a machine.
	ForSeed, ForSerial string
	// Now is when the credentials are made (default time.Now).
	Now func() time.Time
}

// Created is what Create made.
type Created struct {
	Site *SiteConfig
	// SignedBy is the fingerprint of the key that signed the medium, if one did.
	SignedBy string
	// CredentialsFile holds the site's sealed credentials, if any were made.
	CredentialsFile string
}

// Create validates a site config and writes its medium: bound, its credentials made and
// sealed to their recipients, its secrets sealed, signed. Every argument is checked (and
// the key opened) before anything is written. A problem with the arguments or the site
// config is a *badinput.Error; an invalid site config is its
// *strictyaml.ValidationErrors, which lists every problem.
func Create(ctx context.Context, o CreateOptions) (*Created, error) {
	// Before anything is made: a device is written in place, a directory, a character
	// device, a read-only file or the site config itself is refused.
	block, err := output.Check(o.Output, o.Config)
	if err != nil {
		return nil, outputErr(err)
	}
	rcpts, err := credentials.ParseRecipients(o.Recipients)
	if err != nil {
		return nil, badinput.Wrap(err)
	}
	sealRcpts, err := sealRecipients(o.SealTo)
	if err != nil {
		return nil, badinput.Wrap(err)
	}
	// The key first: a wrong passphrase must leave nothing written.
	signer, err := o.signer()
	if err != nil {
		return nil, err
	}
	sc, err := Load(o.Config)
	var ve *strictyaml.ValidationErrors
	if errors.As(err, &ve) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("loading the site config %s: %w", o.Config, err)
	}
	if err := sc.Bind(o.ForSeed, o.ForSerial); err != nil {
		return nil, inputErrorf("site-config create: %w", err)
	}
	if len(rcpts) == 0 && sc.Spec.ClusterName != "" && sc.Spec.KubeadminPasswordHash == "" && !o.NoKubeadmin {
		return nil, inputErrorf("site-config create: %w; give --credentials-recipient KEY (an age or SSH public key), "+
			"or spec.kubeadminPasswordHash, or --no-kubeadmin", ErrNoCredentialsRecipient)
	}
	res := &Created{Site: sc}
	if len(rcpts) > 0 {
		if res.CredentialsFile, err = o.writeCredentials(sc, rcpts, block); err != nil {
			return nil, err
		}
	}
	return res, o.writeMedium(ctx, res, sealRcpts, signer)
}

// writeMedium seals the site's secrets and writes the (signed) medium.
func (o CreateOptions) writeMedium(ctx context.Context, res *Created, sealRcpts []age.Recipient, signer *trust.Signer) error {
	if len(sealRcpts) > 0 {
		if err := res.Site.EncryptSecrets(sealRcpts); err != nil {
			return inputErrorf("site-config create --seal-to: %w", err)
		}
	}
	inputs := []string{o.Config}
	if o.SignBy != "" {
		inputs = append(inputs, o.SignBy)
	}
	if err := WriteMedium(ctx, res.Site, o.Output, MediumOptions{Signer: signer, Inputs: inputs}); err != nil {
		return outputErr(err)
	}
	if signer != nil {
		pub, err := signer.PublicKey()
		if err != nil {
			return err
		}
		res.SignedBy = pub.Fingerprint
	}
	return nil
}

// signer opens the SignBy key; a missing passphrase or a wrong one is the caller's to fix.
func (o CreateOptions) signer() (*trust.Signer, error) {
	if o.SignBy == "" {
		if o.PassphraseFileGiven {
			return nil, inputErrorf("site-config create: --passphrase-file is for the key of --sign-by, which is not given")
		}
		return nil, nil
	}
	pass, err := trust.Passphrase(o.PassphraseFile, o.PassphraseEnv)
	if err != nil {
		return nil, inputErrorf("site-config create --sign-by: %w", err)
	}
	s, err := trust.LoadSigner(o.SignBy, pass, o.Creator)
	if err != nil {
		return nil, inputErrorf("site-config create --sign-by: %w", err)
	}
	return s, nil
}

// writeCredentials makes the site's credentials and seals them to rcpts, and returns the
// file they went to.
func (o CreateOptions) writeCredentials(sc *SiteConfig, rcpts []age.Recipient, block bool) (string, error) {
	path := o.CredentialsOut
	if path == "" && block {
		return "", inputErrorf("site-config create: %s is a device; name the credentials file with --credentials-out FILE", o.Output)
	}
	if path == "" {
		path = o.Output + ".credentials.age"
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	creds, err := MakeCredentials(sc, nil, now(), !o.NoKubeadmin)
	if err != nil {
		return "", err
	}
	return path, sealCredentials(path, rcpts, creds)
}

// sealRecipients parses --seal-to: age X25519 recipients, what a seed's identity opens.
func sealRecipients(keys []string) ([]age.Recipient, error) {
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

// sealCredentials seals the site's generated credentials to rcpts, 0600, staged and
// renamed so a failure leaves no partial file.
func sealCredentials(path string, rcpts []age.Recipient, c *SiteCredentials) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the site's credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := credentials.Encrypt(tmp, rcpts, c.Files()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the site's credentials: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// outputErr makes a refused output path the caller's input.
func outputErr(err error) error {
	if output.IsRefused(err) {
		return inputErrorf("site-config create: %w", err)
	}
	return err
}

func inputErrorf(format string, args ...any) error {
	return badinput.Errorf(format, args...)
}

// Summary says what the site config sets, in one line, never the pull secret.
func (sc *SiteConfig) Summary() string {
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

// Summary says where a medium bound by b may be applied.
func (b *Binding) Summary() string {
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
