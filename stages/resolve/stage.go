package resolve

import (
	"context"
	"path/filepath"

	"github.com/snofactory/snofactory/pipeline"
)

// Name is the stage name.
const Name = "resolve"

// version changes whenever the stage writes something different for the same inputs.
const version = "1"

// Options is exactly what the stage reads.
type Options struct {
	// Release is the release image (tag or digest).
	Release string `json:"release"`
	// Arch is the node architecture in CoreOS naming (x86_64, aarch64, ...). Default x86_64.
	Arch string `json:"arch,omitempty"`
	// Operators are day-2 operator bundle images.
	Operators []string `json:"operators,omitempty"`
	// Images are extra images to precache.
	Images []string `json:"images,omitempty"`
	// Registry says how registries are reached.
	Registry Registry `json:"registry"`
}

// New returns the resolve stage. Its output holds lock.json and bin/openshift-install.
//
// A resolution by tag is only as reproducible as the tag; the stage's key covers the
// options, so a moved tag is only seen after --force resolve or with build --locked.
func New(opts Options) pipeline.Stage {
	s := pipeline.Stage{
		Name:    Name,
		Version: version,
		Options: opts,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			lock, err := Resolve(ctx, opts, Runtime{Secrets: env.Secrets, OutDir: env.Out, Log: env.Log})
			if err != nil {
				return err
			}
			if err := WriteLock(filepath.Join(env.Out, LockFile), lock); err != nil {
				return err
			}
			env.Log.Info("wrote lock", "images", len(lock.Images), "release", lock.Release.Version)
			return nil
		},
	}
	if opts.Registry.RegistriesConf != "" {
		s.Files = map[string]string{"registries.conf": opts.Registry.RegistriesConf}
	}
	if opts.Registry.PullSecret != "" {
		s.Secrets = []string{opts.Registry.PullSecret}
	}
	return s
}

// LockPath returns the lock file inside a resolve stage output directory.
func LockPath(outDir string) string { return filepath.Join(outDir, LockFile) }
