package seedref

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// Dir returns a seed directory holding the seed, to use: a local seed's own, or a
// referenced seed pulled (trusted and verified) where the staging options say. done
// removes what was staged (a local seed and a WithStagingDir directory stay); call it
// once the directory is no longer needed.
func (s *Seed) Dir(ctx context.Context) (dir string, done func() error, err error) {
	nothing := func() error { return nil }
	if s.local {
		return s.ref, nothing, nil
	}
	opts, err := s.checkFrom()
	if err != nil {
		return "", nil, err
	}
	ref, err := s.trusted(ctx)
	if err != nil {
		return "", nil, err
	}
	dir, err = s.o.staging.make()
	if err != nil {
		return "", nil, fmt.Errorf("pulling %s: %w", s.ref, err)
	}
	done = func() error { return os.RemoveAll(dir) }
	if s.o.staging.dir != "" {
		done = nothing
	}
	if _, err := ociseed.Pull(ctx, ref, dir, opts...); err != nil {
		return "", nil, s.o.staging.failed(err, done)
	}
	return dir, done, nil
}

// failed ends a pull for use that failed. A target's staging keeps the verified chunks, so
// the same command run again resumes, and the message says where they are; any other
// staging is removed, and the message names no directory.
func (st staging) failed(err error, done func() error) error {
	var pe *ociseed.PartialPullError
	if !errors.As(err, &pe) {
		return errors.Join(err, done())
	}
	if st.target != "" {
		return err
	}
	return errors.Join(pe.Err, done())
}

// make creates the staging directory.
func (st staging) make() (string, error) {
	switch {
	case st.dir != "":
		return st.dir, nil
	case st.target != "":
		return targetStaging(st.target)
	}
	prefix := st.prefix
	if prefix == "" {
		prefix = "snofactory-seed-"
	}
	return os.MkdirTemp("", prefix)
}

// targetStaging is one directory per target under $TMPDIR, 0700, owned by us and not a
// symlink, so a write that was killed resumes.
func targetStaging(target string) (string, error) {
	abs, err := filepath.Abs(target)
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

// Index reads the chunk index of the seed's chunked disk; of a referenced seed, only its
// manifest and index are fetched.
func (s *Seed) Index(ctx context.Context) (*diskpack.Index, error) {
	if !s.local {
		_, x, err := ociseed.DiskIndex(ctx, s.ref, s.o.pullOptions()...)
		return x, err
	}
	m, err := seed.Check(s.ref)
	if err != nil {
		return nil, err
	}
	for _, d := range m.Disks {
		if d.Format == seed.FormatChunked {
			return seed.ReadIndex(s.ref, d)
		}
	}
	return nil, inputErrorf("%s has no chunked disk (sealed before schemaVersion 2, or without the chunked format)", s.ref)
}
