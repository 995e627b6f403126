package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	units "github.com/docker/go-units"
	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/site/fit"
)

func newSeedCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "seed",
		Short: "Push, pull, inspect, verify and write seed images",
		Long: "A seed is a directory (seed.json, the disk as chunks (disk.pack, disk.index), qcow2 and/or raw.zst, " +
			"credentials.age) or an OCI " +
			"artifact at REF: a registry reference (docker:// optional), oci:DIR[:TAG] or oci-archive:FILE[:TAG].",
	}
	var reg registryFlags
	c.PersistentFlags().BoolVar(&reg.tlsVerify, "tls-verify", true, "require HTTPS with a verified certificate "+
		"(registries on 127.0.0.1 or localhost are plain HTTP regardless)")
	c.PersistentFlags().IntVar(&reg.jobs, "jobs", ociseed.DefaultJobs, "chunks moved in parallel")
	c.PersistentFlags().StringVar(&reg.policy, "policy", "", "trust policy a seed read from REF must satisfy (containers-policy.json(5); default "+trust.DefaultPolicy+")")
	c.PersistentFlags().StringVar(&reg.registriesDir, "registries.d", "", "where registries' signatures are (containers-registries.d(5); default "+trust.DefaultRegistriesDir+")")
	c.AddCommand(newSeedPushCommand(&reg), newSeedPullCommand(&reg), newSeedInspectCommand(&reg),
		newSeedVerifyCommand(&reg), newSeedWriteCommand(&reg), newSeedBootCommand(&reg), newSeedDiffCommand(&reg))
	return c
}

// registryFlags are the flags every seed subcommand shares.
type registryFlags struct {
	tlsVerify     bool
	jobs          int
	policy        string
	registriesDir string
}

// open resolves a seed argument with the registry flags and the trust policy.
func (r *registryFlags) open(ctx context.Context, ref string, extra ...seedref.Option) (*seedref.Seed, error) {
	p := trust.Policy{File: r.policy, RegistriesDir: r.registriesDir}
	return seedref.Open(ctx, ref, append([]seedref.Option{seedref.WithPolicy(p),
		seedref.WithInsecure(!r.tlsVerify), seedref.WithJobs(r.jobs)}, extra...)...)
}

func (r *registryFlags) options(extra ...ociseed.Option) []ociseed.Option {
	return append([]ociseed.Option{ociseed.WithInsecure(!r.tlsVerify), ociseed.WithJobs(r.jobs)}, extra...)
}

// seedDir checks that dir holds a readable seed manifest; a missing or invalid one is the
// user's input.
func seedDir(dir string) (*seed.Manifest, error) {
	m, err := seed.ReadManifest(dir)
	if err != nil {
		return nil, badInput(fmt.Errorf("%s is not a seed directory: %w", dir, err))
	}
	return m, nil
}

func newSeedPushCommand(reg *registryFlags) *cobra.Command {
	var chunk, source, signBy, passFile string
	var attach []string
	c := &cobra.Command{
		Use:   "push SRC REF",
		Short: "Push the seed directory SRC to REF as an OCI artifact",
		Long: "Chunks the registry already has are not sent again: re-pushing an unchanged seed sends no blob " +
			"bytes, and re-running a push that was interrupted sends only the chunks it had not finished.",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			size, err := units.RAMInBytes(chunk)
			if err != nil || size <= 0 {
				return badInput(fmt.Errorf("--chunk-size %q: want a size such as 64MiB", chunk))
			}
			var refs []ociseed.Referrer
			for _, a := range attach {
				file, typ, ok := strings.Cut(a, "=")
				if !ok || file == "" || typ == "" {
					return badInput(fmt.Errorf("--attach %q: want FILE=ARTIFACT_TYPE", a))
				}
				refs = append(refs, ociseed.Referrer{File: file, ArtifactType: typ})
			}
			if _, err := seedDir(args[0]); err != nil {
				return err
			}
			if _, err := ociseed.ParseLocation(args[1], false); err != nil {
				return badInput(err)
			}
			var signer *trust.Signer
			if signBy != "" {
				// The target and the key are checked before the push, so a seed is never
				// pushed unsigned by a push asked to sign it.
				loc, err := ociseed.ParseLocation(args[1], !reg.tlsVerify)
				if err != nil {
					return badInput(err)
				}
				if loc.Transport != ociseed.TransportRegistry {
					return badInput(fmt.Errorf("--sign-by: %s is not a registry; signatures are attached in a registry", args[1]))
				}
				pass, err := trust.Passphrase(passFile, passphraseEnv)
				if err != nil {
					return badInput(err)
				}
				if signer, err = trust.LoadSigner(signBy, pass, "snofactory "+versions.Self()); err != nil {
					return badInput(fmt.Errorf("--sign-by: %w", err))
				}
			}
			res, err := ociseed.Push(cmd.Context(), args[0], args[1], reg.options(ociseed.WithChunkSize(size),
				ociseed.WithSource(source), ociseed.WithReferrers(refs...))...)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pushed %s@%s: %d blobs, %s, %s sent\n", res.Location, res.Digest, res.Blobs,
				units.BytesSize(float64(res.Bytes)), units.BytesSize(float64(res.Sent)))
			if signer != nil {
				tag, err := signSeed(cmd.Context(), signer, reg, args[1], res.Digest, res.Instances)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Signed %s@%s with %s (%s)\n", res.Location, res.Digest, signBy, tag)
			}
			return nil
		},
	}
	c.Flags().StringVar(&chunk, "chunk-size", units.BytesSize(ociseed.DefaultChunkSize), "size of the chunks files are cut into")
	c.Flags().StringVar(&source, "source", "", "org.opencontainers.image.source annotation (e.g. the blueprint's repository)")
	c.Flags().StringArrayVar(&attach, "attach", nil, "FILE=ARTIFACT_TYPE attached as a referrer of the seed (repeatable)")
	c.Flags().StringVar(&signBy, "sign-by", "", "sign the pushed seed with this sigstore private key (snofactory keys generate)")
	c.Flags().StringVar(&passFile, "passphrase-file", "", "the --sign-by key's passphrase (else $"+passphraseEnv+")")
	return c
}

// signSeed signs the pushed seed (its top manifest d and the manifests of its index) and
// returns the signature's tag.
func signSeed(ctx context.Context, s *trust.Signer, reg *registryFlags, ref string, d digest.Digest, instances []digest.Digest) (string, error) {
	at, err := seed.SourceDate(nil)
	if err != nil {
		return "", badInput(err)
	}
	if err := trust.SignSeed(ctx, s, ref, d, instances, at, reg.options()...); err != nil {
		return "", err
	}
	return ociseed.SignatureTag(d), nil
}

func newSeedPullCommand(reg *registryFlags) *cobra.Command {
	var from string
	c := &cobra.Command{
		Use:   "pull REF DIR",
		Short: "Pull the seed at REF into DIR and verify every digest",
		Long: "An interrupted pull resumes where it stopped when run again with the same DIR. With --from OLD " +
			"(an earlier seed directory, a raw disk file, or a device holding an earlier seed), a chunked seed " +
			"fetches only the chunks OLD lacks; each chunk taken from OLD is checked first.",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st := &ociseed.PullStats{}
			s, err := reg.open(cmd.Context(), args[0], seedref.RemoteOnly(), seedref.WithFrom(from), seedref.WithPullStats(st))
			if err != nil {
				return err
			}
			m, err := s.Pull(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			// Not "verified": a chunked disk's raw digest is checked when it is written (or by
			// seed verify), not here; what was checked is said as it is.
			fmt.Fprintf(cmd.OutOrStdout(), "Pulled seed %s into %s (%d disks; every file and chunk matches its digest)%s\n", m.Name, args[1], len(m.Disks), st.Summary(from))
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", "reuse the chunks of OLD: an earlier seed directory, a raw disk or a device")
	return c
}

func newSeedDiffCommand(reg *registryFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "Show how much of seed B seed A already holds: what moving B to where A is costs",
		Long:  "A and B are seed directories or references; only their manifests and chunk indexes are read.",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var idx [2]*diskpack.Index
			for i, a := range args {
				s, err := reg.open(cmd.Context(), a)
				if err != nil {
					return err
				}
				if idx[i], err = s.Index(cmd.Context()); err != nil {
					return err
				}
			}
			return diskpack.Compare(idx[0], idx[1]).WriteText(cmd.OutOrStdout(), args[0], args[1])
		},
	}
}

func newSeedInspectCommand(reg *registryFlags) *cobra.Command {
	var output string
	var keyFiles []string
	var sbom bool
	c := &cobra.Command{
		Use:   "inspect REF|DIR",
		Short: "Show a seed's manifest, signatures and attestations (only metadata is fetched)",
		Long: "For a seed in a registry, the signatures and attestations attached to it (cosign's sha256-<digest>.sig " +
			"and .att) are listed; with --key, each is checked against the public keys, and the fingerprint of the key " +
			"that verified it is shown. --sbom prints the seed's SPDX document instead. -o json prints " +
			"{\"digest\", \"seed\" (seed.json), \"signatures\", \"attestations\"}.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := textOrJSON("--output", output); err != nil {
				return err
			}
			var keys []trust.PublicKey
			for _, f := range keyFiles {
				k, err := trust.LoadPublicKey(f)
				if err != nil {
					return badInput(fmt.Errorf("--key: %w", err))
				}
				keys = append(keys, k)
			}
			s, err := reg.open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m, attached, err := s.Inspect(cmd.Context(), keys)
			if err != nil {
				return err
			}
			if sbom {
				return printSBOM(cmd.OutOrStdout(), s, m, attached, len(keys) > 0)
			}
			in := seedref.NewInspection(m, attached)
			if output == "json" {
				err = writeJSON(cmd.OutOrStdout(), in)
			} else {
				err = in.WriteText(cmd.OutOrStdout(), len(keys) > 0)
			}
			if err != nil {
				return err
			}
			// With keys, a seed they do not vouch for exits 2, after the listing that says why.
			return badInput(attached.Untrusted(args[0], len(keys) > 0))
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	c.Flags().StringArrayVar(&keyFiles, "key", nil, "check signatures and attestations with this public key (PREFIX.pub; repeatable)")
	c.Flags().BoolVar(&sbom, "sbom", false, "print the seed's SPDX SBOM (from its attestation, or the seed directory's file)")
	return c
}

// printSBOM prints the seed's SPDX document, indented: a registry seed's SPDX attestation
// (verified when keys were given), or a seed directory's own file.
func printSBOM(w io.Writer, s *seedref.Seed, m *seed.Manifest, a *trust.Attached, checked bool) error {
	doc, err := s.SBOM(m, a, checked)
	if err != nil && s.Local() {
		return err
	} else if err != nil {
		return badInput(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return fmt.Errorf("%s: the SBOM is not JSON: %w", s.Ref(), err)
	}
	_, err = w.Write(append(pretty.Bytes(), '\n'))
	return err
}

func newSeedVerifyCommand(reg *registryFlags) *cobra.Command {
	var device string
	c := &cobra.Command{
		Use:   "verify REF|DIR [--device DEV]",
		Short: "Check every digest of a seed: each stored file and each disk's raw bytes",
		Long: "A REF is pulled into a temporary directory under $TMPDIR, checked chunk by chunk, then as a whole.\n" +
			"With --device, DEV (a disk or file that seed write wrote) is checked instead: complete (an " +
			"interrupted write leaves its first MiB cleared) and byte for byte the seed's raw disk.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if device != "" {
				return verifyDevice(cmd, reg, args[0], device)
			}
			s, err := reg.open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := s.Verify(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: every digest matches\n", args[0])
			return nil
		},
	}
	c.Flags().StringVar(&device, "device", "", "check this disk or file against the seed instead")
	return c
}

// verifyDevice checks that device holds the seed at src (a directory; a REF is pulled,
// once the trust policy accepts it).
func verifyDevice(cmd *cobra.Command, reg *registryFlags, src, device string) error {
	s, err := reg.open(cmd.Context(), src, seedref.WithTempStaging("snofactory-seed-verify-"))
	if err != nil {
		return err
	}
	d, err := s.VerifyDevice(cmd.Context(), device)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: holds the seed's disk, complete; raw digest %s verified\n", device, d.RawDigest)
	return nil
}

func newSeedWriteCommand(reg *registryFlags) *cobra.Command {
	var image, device, from, site string
	c := &cobra.Command{
		Use:   "write --image REF|DIR --device DEV [--site SITE.yaml]",
		Short: "Write a seed's raw disk onto DEV (a block device or a file), verifying as it writes",
		Long: "DEV must not be mounted. A REF is first pulled (and verified) into a temporary directory " +
			"under $TMPDIR; the raw disk is then streamed onto DEV and its digest checked. With --from OLD (an " +
			"earlier seed directory, or DEV itself when it holds an earlier seed), the pull fetches only the " +
			"chunks OLD lacks. With --site, a site the seed cannot serve is refused (exit 2) before anything is " +
			"pulled or written.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if image == "" || device == "" {
				return badInput(errors.New("--image and --device are both required"))
			}
			// The output rules on DEV before a long pull: nothing is fetched for a DEV refused.
			if err := output.CheckFile("--device", device); err != nil {
				return err
			}
			st := &ociseed.PullStats{}
			s, err := reg.open(cmd.Context(), image, seedref.WithStagingFor(device), seedref.WithFrom(from), seedref.WithPullStats(st))
			if err != nil {
				return err
			}
			if s.Local() && from != "" {
				return badInput(errors.New("--from reuses chunks for a seed pulled from REF; --image names a local seed directory"))
			}
			if site != "" {
				if err := fit.CheckSiteFile(cmd.Context(), cmd.ErrOrStderr(), s, site); err != nil {
					return err
				}
			}
			// Staged for the write and removed once it ends, either way; a killed write
			// leaves it, and the same write run again resumes its pull from there.
			dir, done, err := s.Dir(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, done()) }()
			if sum := st.Summary(from); sum != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Pulled %s%s\n", image, sum)
			}
			d, err := seed.WriteDevice(cmd.Context(), dir, device)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s (%s) onto %s; raw digest %s verified\n", d.File,
				units.BytesSize(float64(d.VirtualSize)), device, d.RawDigest)
			return nil
		},
	}
	c.Flags().StringVar(&image, "image", "", "the seed: a reference or a seed directory")
	c.Flags().StringVar(&device, "device", "", "block device or file to write the raw disk onto")
	c.Flags().StringVar(&from, "from", "", "reuse the chunks of OLD (an earlier seed directory, or DEV itself)")
	c.Flags().StringVar(&site, "site", "", "refuse to write unless the seed can serve this site config")
	return c
}
