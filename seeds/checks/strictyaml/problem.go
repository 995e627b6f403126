package strictyaml

import (
	"fmt"
	"strings"
)

// Position is a 1-based line and column in a file.
type Position struct{ Line, Col int }

// Problem is one thing wrong with a document, located in its file.
type Problem struct {
	File    string `json:"file"`           // the file as the user named it
	Line    int    `json:"line,omitempty"` // 1-based; 0 when the problem concerns the whole file
	Col     int    `json:"col,omitempty"`  // 1-based; 0 when unknown
	Path    string `json:"path,omitempty"` // the field, e.g. spec.openshift.clusterNetwork[0].cidr; empty for file-level problems
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"` // a suggestion, e.g. did you mean "type"?; may be empty
}

// String formats the problem as FILE:LINE:COL: PATH: MESSAGE; hint: HINT.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		col := p.Col
		if col < 1 {
			col = 1
		}
		fmt.Fprintf(&b, ":%d:%d", p.Line, col)
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(p.Hint)
	}
	return b.String()
}

// ValidationErrors is every problem found in one document. Loaders return it (as
// *ValidationErrors) whenever the input is at fault.
type ValidationErrors struct {
	Problems []Problem
}

// Error prints one problem per line.
func (e *ValidationErrors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// FileProblem is a *ValidationErrors holding one problem about the whole file.
func FileProblem(file, msg string) *ValidationErrors {
	return &ValidationErrors{Problems: []Problem{{File: file, Message: msg}}}
}
