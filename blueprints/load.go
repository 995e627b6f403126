package blueprints

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// internalErrorPrefix starts the message of a problem that is a bug in the loader.
const internalErrorPrefix = "internal error reading the blueprint (a bug in snofactory): "

// MaxFileSize bounds a blueprint file; real ones are a few KiB.
const MaxFileSize = 4 << 20

// APIVersions lists the schema versions this build reads.
var APIVersions = []string{v1alpha1.APIVersion}

// LoadFile reads, decodes, defaults and validates the blueprint at path. Relative paths in
// it are resolved against its directory. When the input is at fault it returns a
// *ValidationErrors listing every problem found.
func LoadFile(path string) (*v1alpha1.Blueprint, error) {
	data, err := smallfile.Read(path, MaxFileSize)
	switch {
	case errors.Is(err, smallfile.ErrTooLarge):
		return nil, fileProblem(path, fmt.Sprintf("file is larger than %d bytes", MaxFileSize))
	case errors.Is(err, smallfile.ErrNotRegular):
		return nil, fileProblem(path, "not a regular file")
	case err != nil:
		return nil, fileProblem(path, fmt.Sprintf("cannot read blueprint: %v", unwrapPathError(err)))
	}
	return Parse(data, path)
}

// Parse decodes, defaults and validates a blueprint held in memory; path names it in
// messages and its directory anchors relative paths.
func Parse(data []byte, path string) (bp *v1alpha1.Blueprint, err error) {
	defer func() {
		// Hostile input must never crash the caller; report the panic as a problem so the
		// user sees which file triggered it (and the fuzz test sees it too).
		if r := recover(); r != nil {
			bp, err = nil, fileProblem(path, fmt.Sprintf("%s%v", internalErrorPrefix, r))
		}
	}()
	if len(data) > MaxFileSize {
		return nil, fileProblem(path, fmt.Sprintf("file is larger than %d bytes", MaxFileSize))
	}
	d := &decoder{strictyaml.NewDecoder(path, "blueprint", APIVersions, reflect.TypeOf(v1alpha1.Blueprint{}))}
	root, ok := d.Parse(data)
	if !ok {
		return nil, &ValidationErrors{Problems: d.Problems()}
	}
	bp = &v1alpha1.Blueprint{}
	d.Decode(root, bp)
	if d.Aborted() {
		return nil, &ValidationErrors{Problems: d.Problems()}
	}
	bp.Default()
	if err := bp.SetDir(filepath.Dir(path)); err != nil {
		d.Add(nil, "", fmt.Sprintf("cannot resolve the blueprint's directory: %v", err), "")
	}
	for _, fe := range bp.Validate() {
		if !d.Report(fe.Path, fe.Message, fe.Hint) {
			return nil, &ValidationErrors{Problems: d.Problems()}
		}
	}
	d.checkButane(bp, data)
	d.checkManifests(bp)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return bp, nil
}

func fileProblem(path, msg string) error {
	return strictyaml.FileProblem(path, msg)
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
