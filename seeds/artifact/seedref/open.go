package seedref

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Seed is an opened seed: a directory here, or a reference whose transport is known and
// whose layout or archive exists. Nothing of a referenced seed is read until asked for.
type Seed struct {
	ref   string
	local bool
	loc   ociseed.Location
	o     options
	// pinned is the reference the trust policy accepted (for a registry, by digest), set
	// once the policy has been applied.
	pinned string
}

// Open resolves ref by the one rule for a seed argument: what exists here is a local path
// (a seed directory, or an error saying it is not one); what does not exist but looks like
// a path is an error; only the rest is a reference, parsed, and for oci: and oci-archive:
// checked to exist.
func Open(ctx context.Context, ref string, opts ...Option) (*Seed, error) {
	s := &Seed{ref: ref}
	for _, opt := range opts {
		opt(&s.o)
	}
	// A policy named on the command line is read now, whatever the seed: it is applied only
	// before a reference's content is used (a directory has no signatures; metadata is read
	// without it), but a FIFO, a device or a huge file given as --policy is bad input
	// before anything starts, not a flag silently ignored.
	if s.o.policy.File != "" {
		if _, err := trust.ReadPolicyFile(s.o.policy.File); err != nil {
			return nil, err
		}
	}
	if !s.o.remoteOnly {
		local, err := isLocal(ref)
		if err != nil {
			return nil, err
		}
		if local {
			s.local = true
			return s, nil
		}
	}
	loc, err := ociseed.ParseLocation(ref, false)
	if err != nil {
		return nil, badinput.Wrap(err)
	}
	if loc.Transport != ociseed.TransportRegistry {
		fi, err := os.Stat(loc.Path)
		if err != nil {
			kind := map[string]string{ociseed.TransportLayout: "OCI layout directory", ociseed.TransportOCIArchive: "OCI archive"}[loc.Transport]
			return nil, inputErrorf("%s: no such %s: %s", ref, kind, loc.Path)
		}
		// Refused here, before the trust policy's check opens the archive (containers/image
		// oci/archive/oci_transport.go, createUntarTempDir, untars it whole): a FIFO would
		// block that open and a device would feed it without end.
		if loc.Transport == ociseed.TransportOCIArchive && !fi.Mode().IsRegular() {
			return nil, inputErrorf("%s: %s: %v (an OCI archive is a tar file)", ref, loc.Path, smallfile.ErrNotRegular)
		}
	}
	s.loc = loc
	return s, nil
}

// isLocal tells a local seed directory from a reference; see Open.
func isLocal(arg string) (bool, error) {
	if _, err := os.Lstat(arg); err == nil {
		if _, err := os.Stat(filepath.Join(arg, seed.ManifestFile)); err != nil {
			return true, inputErrorf("%s is not a seed directory: it holds no %s", arg, seed.ManifestFile)
		}
		return true, nil
	}
	for _, p := range []string{"/", "./", "../", "~"} {
		if strings.HasPrefix(arg, p) || arg == "." || arg == ".." {
			return true, inputErrorf("no such seed directory: %s", arg)
		}
	}
	return false, nil
}

// Ref is the reference or directory the seed was opened from.
func (s *Seed) Ref() string { return s.ref }

// Local reports whether the seed is a directory here.
func (s *Seed) Local() bool { return s.local }

// Registry reports whether the seed is in a registry (not a directory, layout or archive).
func (s *Seed) Registry() bool { return !s.local && s.loc.Transport == ociseed.TransportRegistry }

// trusted applies the trust policy, once, before anything of a referenced seed is used,
// and returns the reference to read: for a registry, the digest the policy accepted, so
// that what is read is what was checked. A refusal is the caller's input.
func (s *Seed) trusted(ctx context.Context) (string, error) {
	if s.pinned != "" {
		return s.pinned, nil
	}
	loc, err := ociseed.ParseLocation(s.ref, s.o.insecure)
	if err != nil {
		return "", badinput.Wrap(err)
	}
	name := "docker://" + loc.String()
	switch loc.Transport {
	case ociseed.TransportLayout:
		name = "oci:" + loc.Path + ":" + loc.Tag
	case ociseed.TransportOCIArchive:
		name = "oci-archive:" + loc.Path + ":" + loc.Tag
	}
	p := s.o.policy
	p.Insecure = s.o.insecure
	d, err := trust.Check(ctx, name, p)
	if err != nil {
		if errors.Is(err, trust.ErrUntrusted) {
			return "", badinput.Wrap(err)
		}
		return "", err
	}
	s.pinned = s.ref
	if d != "" && loc.Transport == ociseed.TransportRegistry {
		s.pinned = loc.Ref.Context().Digest(d.String()).String()
	}
	return s.pinned, nil
}

// checkFrom checks that the WithFrom seed exists, before any pull.
func (s *Seed) checkFrom() ([]ociseed.Option, error) {
	var extra []ociseed.Option
	if s.o.stats != nil {
		extra = append(extra, ociseed.WithPullStats(s.o.stats))
	}
	if s.o.from == "" {
		return s.o.pullOptions(extra...), nil
	}
	fi, err := os.Stat(s.o.from)
	if err != nil {
		return nil, badinput.Errorf("--from: %w", err)
	}
	// A FIFO would block the pull's open of it, a character device (/dev/zero) feed it
	// without end: refuse them before anything is pulled.
	if m := fi.Mode(); !m.IsDir() && !m.IsRegular() && (m&os.ModeDevice == 0 || m&os.ModeCharDevice != 0) {
		return nil, badinput.Errorf("--from %s: %v: want a seed directory, a raw disk file or a block device", s.o.from, smallfile.ErrNotRegular)
	}
	return s.o.pullOptions(append(extra, ociseed.WithFrom(s.o.from))...), nil
}

// Pull pulls the referenced seed into dir, trusted and verified; an interrupted pull
// resumes when run again with the same dir.
func (s *Seed) Pull(ctx context.Context, dir string) (*seed.Manifest, error) {
	opts, err := s.checkFrom()
	if err != nil {
		return nil, err
	}
	if err := s.checkPullDir(dir); err != nil {
		return nil, err
	}
	ref, err := s.trusted(ctx)
	if err != nil {
		return nil, err
	}
	return ociseed.Pull(ctx, ref, dir, opts...)
}

// checkPullDir refuses, by the output rules and before anything is fetched, a DIR the pull
// cannot fill: an existing path that is not a directory, or a directory that is the
// --from seed, lies inside it or holds it; the pull would replace or clean out the seed
// whose chunks it reads while it writes DIR.
func (s *Seed) checkPullDir(dir string) error {
	err := output.CheckDir("DIR", dir)
	if err == nil {
		err = output.CheckApart(output.Named{Flag: "--from", Path: s.o.from}, output.Named{Flag: "DIR", Path: dir})
	}
	if err != nil {
		return badinput.Errorf("seed pull: %w; pull into a new directory, or one holding only an earlier pull of this seed", err)
	}
	return nil
}

// Describe reads a referenced seed's manifest and its digest, and nothing else; a local
// seed's manifest, with no digest.
func (s *Seed) Describe(ctx context.Context) (*seed.Manifest, digest.Digest, error) {
	if s.local {
		m, err := seed.ReadManifest(s.ref)
		if err != nil {
			return nil, "", inputErrorf("%s is not a seed directory: %w", s.ref, err)
		}
		return m, "", nil
	}
	return ociseed.Describe(ctx, s.ref, s.o.pullOptions()...)
}

// Inspect describes the seed and, for a referenced one, what is attached to it: its
// signatures and attestations, each checked against keys.
func (s *Seed) Inspect(ctx context.Context, keys []trust.PublicKey) (*seed.Manifest, *trust.Attached, error) {
	m, d, err := s.Describe(ctx)
	if err != nil || s.local {
		return m, nil, err
	}
	a, err := trust.Inspect(ctx, s.ref, d, keys, s.o.pullOptions()...)
	return m, a, err
}

// Verify checks every digest of the seed: each stored file and each disk's raw bytes.
// A referenced seed must first satisfy the trust policy, like every seed a command reads,
// and is then pulled into a temporary directory, by the digest the policy accepted.
func (s *Seed) Verify(ctx context.Context) error {
	if s.local {
		if _, _, err := s.Describe(ctx); err != nil {
			return err
		}
		return seed.Verify(ctx, s.ref)
	}
	ref, err := s.trusted(ctx)
	if err != nil {
		return err
	}
	_, err = ociseed.Verify(ctx, ref, s.o.pullOptions()...)
	return err
}

// inputErrorf is a problem with what the caller asked for.
func inputErrorf(format string, args ...any) error {
	return badinput.Errorf(format, args...)
}
