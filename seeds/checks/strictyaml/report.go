package strictyaml

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// Aborted tells whether decoding stopped early (too many problems, an alias bomb); what was
// decoded then is incomplete and must not be validated further.
func (d *Decoder) Aborted() bool { return d.aborted }

// Problems returns the problems recorded so far, in the order found.
func (d *Decoder) Problems() []Problem { return d.problems }

// Failed tells whether the value at path itself failed to decode.
func (d *Decoder) Failed(path string) bool { return d.failed[path] }

// ValueNode is the YAML node of path's value, or nil when the file does not set it.
func (d *Decoder) ValueNode(path string) *yaml.Node { return d.valNode[path] }

// AddAt records a problem at pos. It is for checks that locate their findings themselves
// (inside an inline fragment, say); the cap on problems applies in Err.
func (d *Decoder) AddAt(pos Position, path, msg, hint string) {
	d.problems = append(d.problems, Problem{File: d.file, Line: pos.Line, Col: pos.Col, Path: path, Message: msg, Hint: hint})
}

// Report records a schema validation error named by path, at the position of its value
// (or of the nearest enclosing key present in the file). An error that only repeats a
// decoding problem is dropped. It returns false once MaxProblems is reached, having recorded
// a last "stopping here" problem: the caller should stop and return what it has.
func (d *Decoder) Report(path, msg, hint string) bool {
	if d.Suppressed(path) {
		return true
	}
	pos := d.Locate(path)
	if len(d.problems) >= MaxProblems {
		d.AddAt(pos, "", fmt.Sprintf("more than %d problems; stopping here", MaxProblems), "")
		return false
	}
	d.AddAt(pos, path, msg, hint)
	return true
}

// Err returns nil when no problem was recorded, else a *ValidationErrors with every problem
// sorted by position and at most MaxProblems of them.
func (d *Decoder) Err() error {
	if len(d.problems) == 0 {
		return nil
	}
	sort.SliceStable(d.problems, func(i, j int) bool {
		a, b := d.problems[i], d.problems[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	if len(d.problems) > MaxProblems {
		d.problems = append(d.problems[:MaxProblems], Problem{File: d.file,
			Message: fmt.Sprintf("%d more problems not shown", len(d.problems)-MaxProblems)})
	}
	return &ValidationErrors{Problems: d.problems}
}

// Suppressed tells whether a validation error at path only repeats a decoding problem:
// the value there (or above it) failed to decode.
func (d *Decoder) Suppressed(path string) bool {
	for p := path; p != ""; p = Parent(p) {
		if d.failed[p] {
			return true
		}
	}
	return false
}

// Locate finds the best position for a problem at path: the value itself, else the key of
// the nearest enclosing field (or the nearest enclosing list item) present in the file, else
// the top of the file.
func (d *Decoder) Locate(path string) Position {
	if pos, ok := d.valPos[path]; ok {
		return pos
	}
	for p := Parent(path); p != ""; p = Parent(p) {
		if pos, ok := d.keyPos[p]; ok {
			return pos
		}
		if pos, ok := d.valPos[p]; ok && strings.HasSuffix(p, "]") {
			return pos // a list item has no key; the item itself is the place
		}
	}
	return Position{1, 1}
}

// Parent strips the last element of a path: a.b[2].c -> a.b[2] -> a.b -> a -> "".
func Parent(p string) string {
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

func (d *Decoder) current() string { return d.versions[len(d.versions)-1] }

// checkAPIVersion makes sure the document is a version the caller reads before decoding
// it. A missing or misspelt apiVersion is reported, and decoding goes on with the current
// (or the nearest) version so the rest of the file is checked too; an unrelated one stops
// here rather than flooding the user with unknown fields.
func (d *Decoder) checkAPIVersion(root *yaml.Node) bool {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "apiVersion" {
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			d.Add(v, "apiVersion", fmt.Sprintf("expected a string, got %s", Describe(v)), "apiVersion: "+d.current())
			return false
		}
		for _, known := range d.versions {
			if v.Value == known {
				return true
			}
		}
		s := suggest.Closest(v.Value, d.versions)
		if s == "" {
			d.Add(v, "apiVersion", fmt.Sprintf("unsupported apiVersion %q", suggest.Clip(v.Value)), "supported: "+strings.Join(d.versions, ", "))
			return false
		}
		d.Add(v, "apiVersion", fmt.Sprintf("unsupported apiVersion %q", suggest.Clip(v.Value)), fmt.Sprintf("did you mean %q?", s))
		d.failed["apiVersion"] = true
		return true
	}
	d.Add(root, "apiVersion", "required", "apiVersion: "+d.current())
	d.failed["apiVersion"] = true
	return true
}
