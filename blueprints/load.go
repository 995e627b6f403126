package blueprints

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/blueprints/suggest"
	"github.com/snofactory/snofactory/blueprints/v1alpha1"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fileProblem(path, fmt.Sprintf("cannot read blueprint: %v", unwrapPathError(err)))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileProblem(path, fmt.Sprintf("cannot read blueprint: %v", unwrapPathError(err)))
	}
	if !fi.Mode().IsRegular() {
		return nil, fileProblem(path, "not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
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
	root, perr := parseYAML(data, path)
	if perr != nil {
		return nil, perr
	}

	d := newDecoder(path, reflect.TypeOf(v1alpha1.Blueprint{}))
	if !d.checkTree(root) {
		return nil, &ValidationErrors{Problems: d.problems}
	}
	if root.Kind != yaml.MappingNode {
		d.add(root, "", fmt.Sprintf("a blueprint is a mapping, got %s", describe(root)), "start with apiVersion: "+v1alpha1.APIVersion)
		return nil, &ValidationErrors{Problems: d.problems}
	}
	if !checkAPIVersion(d, root) {
		return nil, &ValidationErrors{Problems: d.problems}
	}

	bp = &v1alpha1.Blueprint{}
	d.decode(root, reflect.ValueOf(bp).Elem(), "", 0)
	if d.aborted {
		return nil, &ValidationErrors{Problems: d.problems}
	}
	bp.Default()
	if err := bp.SetDir(filepath.Dir(path)); err != nil {
		d.add(nil, "", fmt.Sprintf("cannot resolve the blueprint's directory: %v", err), "")
	}
	for _, fe := range bp.Validate() {
		if d.suppressed(fe.Path) {
			continue
		}
		pos := d.locate(fe.Path)
		if len(d.problems) >= maxProblems {
			d.problems = append(d.problems, Problem{File: path, Line: pos.line, Col: pos.col,
				Message: fmt.Sprintf("more than %d problems; stopping here", maxProblems)})
			return nil, &ValidationErrors{Problems: d.problems}
		}
		d.problems = append(d.problems, Problem{File: path, Line: pos.line, Col: pos.col, Path: fe.Path, Message: fe.Message, Hint: fe.Hint})
	}
	d.checkButane(bp, data)
	d.checkManifests(bp)
	if len(d.problems) > 0 {
		sort.SliceStable(d.problems, func(i, j int) bool {
			a, b := d.problems[i], d.problems[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		})
		if len(d.problems) > maxProblems {
			d.problems = append(d.problems[:maxProblems], Problem{File: path,
				Message: fmt.Sprintf("%d more problems not shown", len(d.problems)-maxProblems)})
		}
		return nil, &ValidationErrors{Problems: d.problems}
	}
	return bp, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML parses exactly one YAML document.
func parseYAML(data []byte, path string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ValidationErrors{Problems: []Problem{{File: path, Line: 1, Col: 1, Message: "empty file", Hint: "start with apiVersion: " + v1alpha1.APIVersion}}}
		}
		return nil, yamlProblem(path, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlProblem(path, err)
	default:
		return nil, &ValidationErrors{Problems: []Problem{{File: path, Line: next.Line, Col: next.Column,
			Message: "more than one YAML document", Hint: "a blueprint file holds exactly one document; remove the extra ---"}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, fileProblem(path, "empty document")
	}
	return doc.Content[0], nil
}

func yamlProblem(path string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ValidationErrors{Problems: []Problem{{File: path, Line: line, Col: 1, Message: "invalid YAML: " + m[2]}}}
	}
	return fileProblem(path, "invalid YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

// checkAPIVersion makes sure the document is a version this build reads before decoding
// it. A missing or misspelt apiVersion is reported, and decoding goes on with the current
// (or the nearest) version so the rest of the file is checked too; an unrelated one stops
// here rather than flooding the user with unknown fields.
func checkAPIVersion(d *decoder, root *yaml.Node) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "apiVersion" {
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			d.add(v, "apiVersion", fmt.Sprintf("expected a string, got %s", describe(v)), "apiVersion: "+v1alpha1.APIVersion)
			return false
		}
		for _, known := range APIVersions {
			if v.Value == known {
				return true
			}
		}
		s := suggest.Closest(v.Value, APIVersions)
		if s == "" {
			d.add(v, "apiVersion", fmt.Sprintf("unsupported apiVersion %q", suggest.Clip(v.Value)), "supported: "+strings.Join(APIVersions, ", "))
			return false
		}
		d.add(v, "apiVersion", fmt.Sprintf("unsupported apiVersion %q", suggest.Clip(v.Value)), fmt.Sprintf("did you mean %q?", s))
		d.failed["apiVersion"] = true
		return true
	}
	d.add(root, "apiVersion", "required", "apiVersion: "+v1alpha1.APIVersion)
	d.failed["apiVersion"] = true
	return true
}

// suppressed tells whether a validation error at path only repeats a decoding problem:
// the value there (or above it) failed to decode.
func (d *decoder) suppressed(path string) bool {
	for p := path; p != ""; p = parent(p) {
		if d.failed[p] {
			return true
		}
	}
	return false
}

// locate finds the best position for a problem at path: the value itself, else the key of
// the nearest enclosing field that is present in the file.
func (d *decoder) locate(path string) position {
	if pos, ok := d.valPos[path]; ok {
		return pos
	}
	for p := parent(path); p != ""; p = parent(p) {
		if pos, ok := d.keyPos[p]; ok {
			return pos
		}
	}
	return position{1, 1}
}

// parent strips the last element of a path: a.b[2].c -> a.b[2] -> a.b -> a -> "".
func parent(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func fileProblem(path, msg string) error {
	return &ValidationErrors{Problems: []Problem{{File: path, Message: msg}}}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
