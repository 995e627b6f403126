package resolve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/versions"
)

// Name is the stage name.
const Name = handoff.StageResolve

// version changes whenever the stage writes something different for the same inputs.
const version = "3"

// Options is exactly what the stage reads.
type Options struct {
	// Release is the release image (tag or digest).
	Release string `json:"release"`
	// Arch is the node architecture in CoreOS naming (x86_64, aarch64, ...). Default x86_64.
	Arch string `json:"arch,omitempty"`
	// Operators are day-2 operator bundle images.
	Operators []string `json:"operators,omitempty"`
	// Catalogs are day-2 operators named by package in a catalog (index) image; each pins
	// the head bundle of its channel and the bundle's related images.
	Catalogs []CatalogOperator `json:"catalogs,omitempty"`
	// Images are extra images to precache.
	Images []string `json:"images,omitempty"`
	// Registry says how registries are reached.
	Registry registries.Config `json:"registry"`
	// ISO is the live ISO the blueprint names by URL (with its sha256), for targets whose ISO
	// does not come from a release. It is pinned into the lock as given.
	ISO *ISOSource `json:"iso,omitempty"`
	// ISOPath is a local live ISO the blueprint names; its sha256 goes into the lock. Its
	// content is keyed through Stage.Files ("live.iso"), its host path is not.
	ISOPath string `json:"-"`
	// ISOLabel is how the blueprint names ISOPath (relative to the blueprint); it is what the
	// lock records.
	ISOLabel string `json:"isoLabel,omitempty"`
	// ISOMissing, when set, says why the blueprint's local ISO cannot be read yet (e.g. it is
	// built by a make target): the stage fails with it when it runs, while a plan still
	// shows the whole graph.
	ISOMissing string `json:"isoMissing,omitempty"`
	// Locked is a lock file the build must match (build --locked): the stage fails, listing
	// every difference, if a fresh resolution differs. Its content is part of the key
	// through Stage.Files, its host path is not.
	Locked string `json:"-"`
}

// New returns the resolve stage. Its output holds lock.json, bin/openshift-install and,
// for a release that ships its live ISO only in machine-os-images, iso/live.iso; its output
// record (handoff.Resolve) names them.
//
// A resolution by tag is only as reproducible as the tag; the stage's key covers the
// options, so a moved tag is only seen after --force resolve or with build --locked.
func New(opts Options) pipeline.Stage {
	s := pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return run(ctx, opts, env)
		},
	}
	files := opts.Registry.Files()
	if opts.ISOPath != "" && opts.ISOMissing == "" {
		files["live.iso"] = opts.ISOPath
	}
	if opts.Locked != "" {
		files["lock.json"] = opts.Locked
	}
	if len(files) > 0 {
		s.Files = files
	}
	s.Secrets = opts.Registry.Secrets()
	return s
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	if opts.ISOMissing != "" {
		return errors.New(opts.ISOMissing)
	}
	env.UseTool("containers/image", versions.Module("github.com/containers/image/v5"))
	lock, err := Resolve(ctx, opts, Runtime{Secrets: env.Secrets, OutDir: env.Out, Scratch: env.Scratch, Log: env.Log})
	if err != nil {
		return err
	}
	if opts.Locked != "" {
		if err := checkLocked(opts.Locked, lock); err != nil {
			return err
		}
		env.Log.Info("resolution matches the lock", "lock", opts.Locked)
	}
	if err := lockfile.WriteLock(filepath.Join(env.Out, lockfile.File), lock); err != nil {
		return err
	}
	if lock.Release.Ref != "" {
		env.Log.Info("wrote lock", "images", len(lock.Images), "release", lock.Release.Version)
	} else {
		env.Log.Info("wrote lock", "images", len(lock.Images))
	}
	return handoff.Write(env, record(lock))
}

// record is the stage's output record for the lock it wrote.
func record(lock *lockfile.Lock) handoff.Resolve {
	rec := handoff.Resolve{Lock: lockfile.File}
	if lock.Installer != nil {
		rec.Installer = handoff.File(lock.Installer.Path)
	}
	if lock.ISO != nil && lock.ISO.InImage() {
		rec.ISO = handoff.File(lock.ISO.Path)
	}
	return rec
}

// Pin resolves everything opts names to digests, as the stage does but without the cache,
// for `snofactory lock`. It pins the installer and a release's live ISO by their images'
// digests without extracting them (a gigabyte for the ISO); a build's resolve adds their
// checksums, and build --locked accepts both forms.
func Pin(ctx context.Context, opts Options, secrets pipeline.SecretSource, log *slog.Logger) (*lockfile.Lock, error) {
	if opts.ISOMissing != "" {
		return nil, errors.New(opts.ISOMissing)
	}
	scratch, err := os.MkdirTemp("", "snofactory-lock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	return Resolve(ctx, opts, Runtime{Secrets: secrets, Scratch: scratch, Log: log})
}

// LockMismatchError is a build --locked whose fresh resolution differs from the lock.
type LockMismatchError struct {
	Lock  string
	Diffs []string
}

func (e *LockMismatchError) Error() string {
	return fmt.Sprintf("the build's inputs no longer match %s (%d differences):\n  - %s",
		e.Lock, len(e.Diffs), strings.Join(e.Diffs, "\n  - "))
}

func checkLocked(path string, fresh *lockfile.Lock) error {
	locked, err := lockfile.ReadLock(path)
	if err != nil {
		return err
	}
	if diffs := lockfile.Verify(locked, fresh); len(diffs) > 0 {
		return &LockMismatchError{Lock: path, Diffs: diffs}
	}
	return nil
}

// ISOSource is a live ISO given by URL and checksum.
type ISOSource struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}
