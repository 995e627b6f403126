package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
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

// trusted checks the seed at ref against the trust policy before anything is read from it,
// and returns the reference to read: for a registry, the digest the policy accepted, so
// that what is pulled is what was checked. A refusal is bad input, and names its reason.
func (r *registryFlags) trusted(ctx context.Context, ref string) (string, error) {
	loc, err := ociseed.ParseLocation(ref, !r.tlsVerify)
	if err != nil {
		return "", badInput(err)
	}
	name := "docker://" + loc.String()
	switch loc.Transport {
	case ociseed.TransportLayout:
		name = "oci:" + loc.Path + ":" + loc.Tag
	case ociseed.TransportOCIArchive:
		name = "oci-archive:" + loc.Path + ":" + loc.Tag
	}
	d, err := trust.Check(ctx, name, trust.Policy{File: r.policy, RegistriesDir: r.registriesDir, Insecure: !r.tlsVerify})
	if err != nil {
		if errors.Is(err, trust.ErrUntrusted) {
			return "", badInput(err)
		}
		return "", err
	}
	if d == "" || loc.Transport != ociseed.TransportRegistry {
		return ref, nil
	}
	return loc.Ref.Context().Digest(d.String()).String(), nil
}

func (r *registryFlags) options(extra ...ociseed.Option) []ociseed.Option {
	return append([]ociseed.Option{ociseed.WithInsecure(!r.tlsVerify), ociseed.WithJobs(r.jobs)}, extra...)
}

// seedLocation checks REF before any work, so a malformed one is the user's input.
func seedLocation(ref string) error {
	_, err := seedSourceLocation(ref, false)
	return err
}

// seedSourceLocation is seedLocation for a seed to read: with source, an oci: layout or
// oci-archive: file must exist here.
func seedSourceLocation(ref string, source bool) (ociseed.Location, error) {
	loc, err := ociseed.ParseLocation(ref, false)
	if err != nil {
		return loc, badInput(err)
	}
	if source && loc.Transport != ociseed.TransportRegistry {
		if _, err := os.Stat(loc.Path); err != nil {
			return loc, badInput(fmt.Errorf("%s: no such %s: %s", ref, map[string]string{ociseed.TransportLayout: "OCI layout directory", ociseed.TransportOCIArchive: "OCI archive"}[loc.Transport], loc.Path))
		}
	}
	return loc, nil
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

// isSeedDir tells a local seed directory from a reference.
func isSeedDir(arg string) bool {
	_, err := os.Stat(filepath.Join(arg, seed.ManifestFile))
	return err == nil
}

// localSeed applies the one rule for a seed argument: what exists locally is a local
// path (a seed directory, or an error saying it is not one); what does not exist but
// looks like a path is an error; only the rest is a reference, checked by the caller.
// It reports whether arg is local.
func localSeed(arg string) (bool, error) {
	if _, err := os.Lstat(arg); err == nil {
		if !isSeedDir(arg) {
			return true, badInput(fmt.Errorf("%s is not a seed directory: it holds no %s", arg, seed.ManifestFile))
		}
		return true, nil
	}
	for _, p := range []string{"/", "./", "../", "~"} {
		if strings.HasPrefix(arg, p) || arg == "." || arg == ".." {
			return true, badInput(fmt.Errorf("no such seed directory: %s", arg))
		}
	}
	return false, nil
}

// seedErr makes a problem with the seed itself, or with the target, the user's input
// (exit 2); a write that stopped part-way stays a failure (exit 1).
func seedErr(err error) error {
	var te *seed.TargetError
	if errors.Is(err, seed.ErrBadSeed) || errors.As(err, &te) || output.IsRefused(err) {
		return badInput(err)
	}
	return err
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
			if err := seedLocation(args[1]); err != nil {
				return err
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
				if signer, err = trust.LoadSigner(signBy, pass, "snofactory "+pipeline.SelfVersion()); err != nil {
					return badInput(fmt.Errorf("--sign-by: %w", err))
				}
			}
			res, err := ociseed.Push(cmd.Context(), args[0], args[1], reg.options(ociseed.WithChunkSize(size),
				ociseed.WithSource(source), ociseed.WithReferrers(refs...))...)
			if err != nil {
				return seedErr(err)
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
			if _, err := seedSourceLocation(args[0], true); err != nil {
				return err
			}
			if fi, err := os.Stat(args[1]); err == nil && !fi.IsDir() {
				return badInput(fmt.Errorf("%s is not a directory: pull a seed into a directory", args[1]))
			}
			opts, st, err := fromOptions(reg, from)
			if err != nil {
				return err
			}
			ref, err := reg.trusted(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m, err := ociseed.Pull(cmd.Context(), ref, args[1], opts...)
			if err != nil {
				return seedErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pulled seed %s into %s (%d disks, verified)%s\n", m.Name, args[1], len(m.Disks), st.summary(from))
			return nil
		},
	}
	c.Flags().StringVar(&from, "from", "", "reuse the chunks of OLD: an earlier seed directory, a raw disk or a device")
	return c
}

// pullStats reports where a pull's chunks came from.
type pullStats struct{ ociseed.PullStats }

func (s *pullStats) summary(from string) string {
	if s.Fetched+s.Reused+s.Resumed == 0 {
		return ""
	}
	out := fmt.Sprintf("; fetched %d chunks (%s)", s.Fetched, units.BytesSize(float64(s.FetchedBytes)))
	if from != "" {
		out += fmt.Sprintf(", reused %d (%s) from %s", s.Reused, units.BytesSize(float64(s.ReusedBytes)), from)
	}
	if s.Resumed > 0 {
		out += fmt.Sprintf(", %d staged by the interrupted pull", s.Resumed)
	}
	return out
}

// fromOptions are the registry options with --from OLD, checked to exist, and stats.
func fromOptions(reg *registryFlags, from string) ([]ociseed.Option, *pullStats, error) {
	st := &pullStats{}
	opts := reg.options(ociseed.WithPullStats(&st.PullStats))
	if from == "" {
		return opts, st, nil
	}
	if _, err := os.Stat(from); err != nil {
		return nil, nil, badInput(fmt.Errorf("--from: %w", err))
	}
	return append(opts, ociseed.WithFrom(from)), st, nil
}

// writeStaging is where seed write pulls a seed for device: one directory per target under
// $TMPDIR, 0700, owned by us and not a symlink, so a write that was killed resumes.
func writeStaging(device string) (string, error) {
	abs, err := filepath.Abs(device)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "snofactory-seed-write-"+digest.FromString(abs).Encoded()[:16])
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("%s is not a private directory of this user: remove it", dir)
	}
	return dir, nil
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
				x, err := seedIndex(cmd, reg, a)
				if err != nil {
					return err
				}
				idx[i] = x
			}
			d := diskpack.Compare(idx[0], idx[1])
			pct := func(a, b int64) float64 {
				if b == 0 {
					return 100
				}
				return 100 * float64(a) / float64(b)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s shares with %s:\n", args[1], args[0])
			fmt.Fprintf(w, "  chunks: %d of %d (%.1f%%)\n", d.SharedChunks, d.Chunks, pct(int64(d.SharedChunks), int64(d.Chunks)))
			fmt.Fprintf(w, "  raw bytes: %s of %s (%.1f%%)\n", units.BytesSize(float64(d.SharedBytes)), units.BytesSize(float64(d.Bytes)), pct(d.SharedBytes, d.Bytes))
			fmt.Fprintf(w, "  stored bytes: %s of %s (%.1f%%); moving %s where %s is sends %s\n", units.BytesSize(float64(d.SharedStored)),
				units.BytesSize(float64(d.Stored)), pct(d.SharedStored, d.Stored), args[1], args[0], units.BytesSize(float64(d.Stored-d.SharedStored)))
			return nil
		},
	}
}

// seedIndex reads the chunk index of a seed directory or reference.
func seedIndex(cmd *cobra.Command, reg *registryFlags, arg string) (*diskpack.Index, error) {
	local, err := localSeed(arg)
	if err != nil {
		return nil, err
	}
	if !local {
		if _, err := seedSourceLocation(arg, true); err != nil {
			return nil, err
		}
		_, x, err := ociseed.DiskIndex(cmd.Context(), arg, reg.options()...)
		return x, seedErr(err)
	}
	m, err := seed.Check(arg)
	if err != nil {
		return nil, seedErr(err)
	}
	for _, d := range m.Disks {
		if d.Format == seed.FormatChunked {
			x, err := seed.ReadIndex(arg, d)
			return x, seedErr(err)
		}
	}
	return nil, badInput(fmt.Errorf("%s has no chunked disk (sealed before schemaVersion 2, or without the chunked format)", arg))
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
			if output != "text" && output != "json" {
				return badInput(fmt.Errorf("--output %q: want text or json", output))
			}
			var keys []trust.PublicKey
			for _, f := range keyFiles {
				k, err := trust.LoadPublicKey(f)
				if err != nil {
					return badInput(fmt.Errorf("--key: %w", err))
				}
				keys = append(keys, k)
			}
			var m *seed.Manifest
			var attached *trust.Attached
			local, err := localSeed(args[0])
			if local && err == nil {
				m, err = seedDir(args[0])
			} else if err == nil {
				_, err = seedSourceLocation(args[0], true)
			}
			if err == nil && !local {
				var d digest.Digest
				if m, d, err = ociseed.Describe(cmd.Context(), args[0], reg.options()...); err == nil {
					attached, err = trust.Inspect(cmd.Context(), args[0], d, keys, reg.options()...)
				}
			}
			if err != nil {
				return err
			}
			if sbom {
				return printSBOM(cmd.OutOrStdout(), args[0], m, local, attached, len(keys) > 0)
			}
			if output == "json" {
				view := struct {
					Digest       digest.Digest           `json:"digest,omitempty"`
					Seed         *seed.Manifest          `json:"seed"`
					Signatures   []trust.SignatureInfo   `json:"signatures"`
					Attestations []trust.AttestationInfo `json:"attestations"`
				}{Seed: m, Signatures: []trust.SignatureInfo{}, Attestations: []trust.AttestationInfo{}}
				if attached != nil {
					view.Digest, view.Signatures, view.Attestations = attached.Digest, attached.Signatures, attached.Attestations
				}
				b, err := json.MarshalIndent(view, "", "  ")
				if err != nil {
					return err
				}
				if _, err = cmd.OutOrStdout().Write(append(b, '\n')); err != nil {
					return err
				}
				return untrusted(args[0], attached, len(keys) > 0)
			}
			if err := printSeed(cmd.OutOrStdout(), m, attached, len(keys) > 0); err != nil {
				return err
			}
			return untrusted(args[0], attached, len(keys) > 0)
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	c.Flags().StringArrayVar(&keyFiles, "key", nil, "check signatures and attestations with this public key (PREFIX.pub; repeatable)")
	c.Flags().BoolVar(&sbom, "sbom", false, "print the seed's SPDX SBOM (from its attestation, or the seed directory's file)")
	return c
}

// untrusted is inspect's verdict when keys were given: the seed must carry a signature one
// of them verifies, and every attestation must verify (exit 2 otherwise, after the listing
// that says why).
func untrusted(ref string, a *trust.Attached, checked bool) error {
	if !checked || a == nil {
		return nil
	}
	var problems []string
	signed := false
	for _, s := range a.Signatures {
		signed = signed || s.VerifiedBy != ""
	}
	if !signed {
		problems = append(problems, "no signature by a given key")
	}
	for _, at := range a.Attestations {
		if at.VerifiedBy == "" {
			problems = append(problems, fmt.Sprintf("the %s attestation does not verify: %s", at.PredicateType, at.Problem))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return badInput(fmt.Errorf("%s is not trusted: %s", ref, strings.Join(problems, "; ")))
}

// printAttached lists a seed's signatures and attestations, each with the key that
// verified it or the reason it does not verify.
func printAttached(tw io.Writer, a *trust.Attached, checked bool) {
	fmt.Fprintf(tw, "Digest:\t%s\n", a.Digest)
	status := func(verifiedBy, problem string) string {
		switch {
		case problem != "":
			return "NOT VERIFIED: " + problem
		case verifiedBy != "":
			return "verified by key " + verifiedBy
		case !checked:
			return "not checked (give --key PREFIX.pub)"
		}
		return ""
	}
	if len(a.Signatures) == 0 {
		fmt.Fprintf(tw, "Signatures:\tnone\n")
	}
	for _, s := range a.Signatures {
		fmt.Fprintf(tw, "Signature:\t%s, by %s at %s: %s\n", s.Identity, s.Creator, s.Signed.Format(time.RFC3339), status(s.VerifiedBy, s.Problem))
	}
	if len(a.Attestations) == 0 {
		fmt.Fprintf(tw, "Attestations:\tnone\n")
	}
	for _, at := range a.Attestations {
		fmt.Fprintf(tw, "Attestation:\t%s, %s: %s\n", at.PredicateType, units.BytesSize(float64(at.Size)), status(at.VerifiedBy, at.Problem))
	}
}

// printSBOM prints the seed's SPDX document: a registry seed's SPDX attestation (verified
// when keys were given), or a seed directory's own file.
func printSBOM(w io.Writer, ref string, m *seed.Manifest, local bool, a *trust.Attached, checked bool) error {
	var doc []byte
	if local {
		b, err := seed.ReadSBOM(ref, m)
		if err != nil {
			return seedErr(err)
		}
		doc = b
	} else {
		for _, at := range a.Attestations {
			if at.PredicateType != trust.PredicateSPDX || at.Predicate == nil {
				continue
			}
			if checked && at.VerifiedBy == "" {
				return badInput(fmt.Errorf("%s: its SBOM attestation does not verify: %s", ref, at.Problem))
			}
			doc = at.Predicate
			break
		}
		if doc == nil {
			return badInput(fmt.Errorf("%s: no SBOM attestation (a seed published with a signing key carries one)", ref))
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return fmt.Errorf("%s: the SBOM is not JSON: %w", ref, err)
	}
	_, err := w.Write(append(pretty.Bytes(), '\n'))
	return err
}

// printSeed describes the seed m and, for a seed in a registry, what is attached to it.
func printSeed(w io.Writer, m *seed.Manifest, attached *trust.Attached, checked bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", m.Name)
	fmt.Fprintf(tw, "Target:\t%s %s\n", m.Target, m.ReleaseVersion)
	fmt.Fprintf(tw, "Firmware:\t%s\n", m.Firmware)
	fmt.Fprintf(tw, "Created:\t%s\n", m.Created.UTC().Format("2006-01-02T15:04:05Z"))
	fmt.Fprintf(tw, "Blueprint:\t%s\n", m.BlueprintDigest)
	fmt.Fprintf(tw, "Lock:\t%s\n", m.LockDigest)
	fmt.Fprintf(tw, "Reconfiguration API:\t%s\n", m.ReconfigurationAPIVersion)
	fmt.Fprintf(tw, "Validation:\t%d passed, %d failed, %d skipped, %d warnings\n",
		m.Validation.Passed, m.Validation.Failed, m.Validation.Skipped, m.Validation.Warnings)
	fmt.Fprintf(tw, "Images:\t%d\n", len(m.Images))
	for _, d := range m.Disks {
		fmt.Fprintf(tw, "Disk %s:\t%s, %s stored, %s raw, raw digest %s\n", d.Format, d.File,
			units.BytesSize(float64(d.Size)), units.BytesSize(float64(d.VirtualSize)), d.RawDigest)
	}
	if c := m.Credentials; c != nil {
		fmt.Fprintf(tw, "Credentials:\t%s, for %s\n", c.File, strings.Join(c.Recipients, ", "))
	}
	if attached != nil {
		printAttached(tw, attached, checked)
	}
	return tw.Flush()
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
			local, err := localSeed(args[0])
			switch {
			case err != nil:
			case local:
				if _, err = seedDir(args[0]); err == nil {
					err = seed.Verify(cmd.Context(), args[0])
				}
			default:
				if _, err = seedSourceLocation(args[0], true); err == nil {
					_, err = ociseed.Verify(cmd.Context(), args[0], reg.options()...)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: every digest matches\n", args[0])
			return nil
		},
	}
	c.Flags().StringVar(&device, "device", "", "check this disk or file against the seed instead")
	return c
}

// verifyDevice checks that device holds the seed at src (a directory; a REF is pulled).
func verifyDevice(cmd *cobra.Command, reg *registryFlags, src, device string) (err error) {
	local, err := localSeed(src)
	if err != nil {
		return err
	}
	dir := src
	if !local {
		if _, err := seedSourceLocation(src, true); err != nil {
			return err
		}
		if dir, err = os.MkdirTemp("", "snofactory-seed-verify-"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
		if _, err := ociseed.Pull(cmd.Context(), src, dir, reg.options()...); err != nil {
			return err
		}
	}
	d, err := seed.VerifyDevice(cmd.Context(), dir, device)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: holds the seed's disk, complete; raw digest %s verified\n", device, d.RawDigest)
	return nil
}

func newSeedWriteCommand(reg *registryFlags) *cobra.Command {
	var image, device, from string
	c := &cobra.Command{
		Use:   "write --image REF|DIR --device DEV",
		Short: "Write a seed's raw disk onto DEV (a block device or a file), verifying as it writes",
		Long: "DEV must not be mounted. A REF is first pulled (and verified) into a temporary directory " +
			"under $TMPDIR; the raw disk is then streamed onto DEV and its digest checked. With --from OLD (an " +
			"earlier seed directory, or DEV itself when it holds an earlier seed), the pull fetches only the " +
			"chunks OLD lacks.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if image == "" || device == "" {
				return badInput(errors.New("--image and --device are both required"))
			}
			// Fail before a long pull if DEV is in use.
			if err := output.CheckNotMounted(device); err != nil {
				return seedErr(err)
			}
			dir := image
			local, err := localSeed(image)
			if err != nil {
				return err
			}
			if !local {
				if _, err := seedSourceLocation(image, true); err != nil {
					return err
				}
				opts, st, err := fromOptions(reg, from)
				if err != nil {
					return err
				}
				ref, err := reg.trusted(cmd.Context(), image)
				if err != nil {
					return err
				}
				if dir, err = writeStaging(device); err != nil {
					return fmt.Errorf("pulling %s: %w", image, err)
				}
				// Removed once the write ends, either way; a killed write leaves it, and
				// the same write run again resumes its pull from the chunks staged there.
				defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
				if _, err := ociseed.Pull(cmd.Context(), ref, dir, opts...); err != nil {
					return seedErr(err)
				}
				if s := st.summary(from); s != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "Pulled %s%s\n", image, s)
				}
			} else if from != "" {
				return badInput(errors.New("--from reuses chunks for a seed pulled from REF; --image names a local seed directory"))
			}
			d, err := seed.WriteDevice(cmd.Context(), dir, device)
			if err != nil {
				return seedErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s (%s) onto %s; raw digest %s verified\n", d.File,
				units.BytesSize(float64(d.VirtualSize)), device, d.RawDigest)
			return nil
		},
	}
	c.Flags().StringVar(&image, "image", "", "the seed: a reference or a seed directory")
	c.Flags().StringVar(&device, "device", "", "block device or file to write the raw disk onto")
	c.Flags().StringVar(&from, "from", "", "reuse the chunks of OLD (an earlier seed directory, or DEV itself)")
	return c
}
