package siteconfig

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// Before anything is made: a device is written in place; a directory, a character
	// device, a read-only file, one of the command's inputs, or the medium and the
	// credentials on one file are refused.
	block, err := output.Check(o.Output, o.inputs(nil)...)
	if err != nil {
		return nil, outputErr(err)
	}
	if err := o.checkOutputs(block, nil); err != nil {
		return nil, err
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
	// The files the site config names are inputs too, known only now.
	if err := o.checkOutputs(block, sc); err != nil {
		return nil, err
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

// inputs are the files Create reads, which it never writes: the site config, the signing
// key and its passphrase file, and, once loaded, the files sc names.
func (o CreateOptions) inputs(sc *SiteConfig) []string {
	in := []string{o.Config}
	for _, f := range []string{o.SignBy, o.PassphraseFile} {
		if f != "" {
			in = append(in, f)
		}
	}
	if sc != nil {
		in = append(in, sc.Inputs()...)
	}
	return in
}

// checkOutputs refuses, before anything is written, a medium or credentials file that the
// output rules refuse, and the two on one file (the credentials would be lost).
func (o CreateOptions) checkOutputs(block bool, sc *SiteConfig) error {
	outs := []output.Named{{Flag: "-o", Path: o.Output}}
	if len(o.Recipients) > 0 || o.CredentialsOut != "" {
		path, err := o.credentialsPath(block)
		if err != nil {
			return err
		}
		outs = append(outs, output.Named{Flag: "--credentials-out", Path: path})
	}
	return outputErr(output.CheckAll(outs, o.inputs(sc)...))
}

// credentialsPath is where the sealed credentials go: --credentials-out, or beside a
// medium that is a file.
func (o CreateOptions) credentialsPath(block bool) (string, error) {
	if o.CredentialsOut != "" {
		return o.CredentialsOut, nil
	}
	if block {
		return "", inputErrorf("site-config create: %s is a device; name the credentials file with --credentials-out FILE", o.Output)
	}
	return o.Output + ".credentials.age", nil
}

// writeMedium seals the site's secrets and writes the (signed) medium.
func (o CreateOptions) writeMedium(ctx context.Context, res *Created, sealRcpts []age.Recipient, signer *trust.Signer) error {
	if len(sealRcpts) > 0 {
		if err := res.Site.EncryptSecrets(sealRcpts); err != nil {
			return inputErrorf("site-config create --seal-to: %w", err)
		}
	}
	if err := WriteMedium(ctx, res.Site, o.Output, MediumOptions{Signer: signer, Inputs: o.inputs(res.Site)}); err != nil {
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
	path, err := o.credentialsPath(block)
	if err != nil {
		return "", err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	creds, err := MakeCredentials(sc, nil, now(), !o.NoKubeadmin)
	if err != nil {
		return "", err
	}
	return path, outputErr(sealCredentials(path, rcpts, creds, o.inputs(sc)))
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

// sealCredentials seals the site's generated credentials to rcpts through the output
// rules (output.Write): 0600, staged and renamed so a failure leaves no partial file.
func sealCredentials(path string, rcpts []age.Recipient, c *SiteCredentials, inputs []string) error {
	return output.Write(path, 0o600, func(f *os.File) error {
		if err := credentials.Encrypt(f, rcpts, c.Files()); err != nil {
			return fmt.Errorf("writing the site's credentials %s: %w", path, err)
		}
		return nil
	}, inputs...)
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
