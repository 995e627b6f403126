package handoff

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/snofactory/snofactory/pipeline"
)

// Stage names. Stages name each other only through these constants.
const (
	StageResolve  = "resolve"
	StageRender   = "render"
	StageLiveISO  = "live-iso"
	StagePrecache = "precache"
	StageInstall  = "install"
	StageValidate = "validate"
	StageSeal     = "seal"
	StagePublish  = "publish"
)

// File is a slash-separated path relative to the output folder of the stage whose record
// holds it; "" means the stage did not produce that file.
type File string

// Input is an upstream stage's output as a downstream stage sees it: its record and its
// (read-only) folder.
type Input[T any] struct {
	Stage string
	Dir   string
	Out   T
}

// Path returns f inside the upstream stage's folder. Read has checked that every File of the
// record stays inside it.
func (in Input[T]) Path(f File) string {
	return filepath.Join(in.Dir, filepath.FromSlash(string(f)))
}

// Record is implemented by every output record type: the stage that writes it, and the
// files it names, for checking. The stage comes from the type, so a reader names what it
// reads once, as a type, and the stage it depends on follows from it.
type Record interface {
	stage() string
	files() []File
}

// Deps is the Deps list of a stage that reads these records (pass zero values):
// pipeline.Stage.Deps derived from what the stage reads, so the two cannot disagree.
func Deps(reads ...Record) []string {
	deps := make([]string, 0, len(reads))
	for _, r := range reads {
		if !slices.Contains(deps, r.stage()) {
			deps = append(deps, r.stage())
		}
	}
	return deps
}

// Write stores rec as the running stage's output record.
func Write[T Record](env *pipeline.Env, rec T) error {
	if err := checkFiles(rec.files()); err != nil {
		return fmt.Errorf("output record: %w", err)
	}
	return env.WriteOutput(rec)
}

// Read returns the output record of type T from the upstream stage that writes it, which
// must be among the running stage's Deps.
func Read[T Record](env *pipeline.Env) (Input[T], error) {
	var zero T
	stage := zero.stage()
	in := Input[T]{Stage: stage}
	dir, err := env.ReadOutput(stage, &in.Out)
	if err != nil {
		return in, err
	}
	in.Dir = dir
	if err := checkFiles(in.Out.files()); err != nil {
		return in, fmt.Errorf("the %s stage's output record: %w", stage, err)
	}
	return in, nil
}

// checkFiles refuses paths that leave the output folder: a record is read from the cache,
// which a user can edit.
func checkFiles(files []File) error {
	for _, f := range files {
		if f != "" && !filepath.IsLocal(filepath.FromSlash(string(f))) {
			return fmt.Errorf("file %q leaves the stage's output folder", f)
		}
	}
	return nil
}
