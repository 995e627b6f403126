package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Parse parses data as exactly one YAML document, bounds its size and shape (CheckTree), and
// checks that its root is a mapping with a known apiVersion. It returns the root mapping,
// or false when the document cannot be decoded (the problems are recorded).
func (d *Decoder) Parse(data []byte) (*yaml.Node, bool) {
	root, ok := d.ParseDocument(data)
	if !ok {
		return nil, false
	}
	if root.Kind != yaml.MappingNode {
		d.Add(root, "", fmt.Sprintf("a %s is a mapping, got %s", d.noun, Describe(root)), "start with apiVersion: "+d.current())
		return nil, false
	}
	if !d.checkAPIVersion(root) {
		return nil, false
	}
	return root, true
}

// ParseDocument is the first half of Parse, for a document in another tool's format that
// the caller decodes in part (an install-config.yaml): exactly one YAML document, bounded
// (CheckTree). Its apiVersion is not judged; the caller checks for duplicate keys with
// Duplicates before it decodes.
func (d *Decoder) ParseDocument(data []byte) (*yaml.Node, bool) {
	if !utf8.Valid(data) && !hasBOM16(data) {
		// yaml.v3 reports encoding errors without a position; find the byte ourselves.
		d.AddAt(offsetPosition(data, firstInvalidUTF8(data)), "", "invalid YAML: the file is not valid UTF-8", "save the file as UTF-8")
		return nil, false
	}
	doc, next, err := parseDocuments(data)
	switch {
	case errors.Is(err, io.EOF):
		d.AddAt(Position{1, 1}, "", "empty file", "start with apiVersion: "+d.current())
		return nil, false
	case err != nil:
		d.problems = append(d.problems, d.syntaxProblem(data, err))
		return nil, false
	case next != nil:
		d.AddAt(Position{next.Line, next.Column}, "", "more than one YAML document",
			fmt.Sprintf("a %s file holds exactly one document; remove the extra ---", d.noun))
		return nil, false
	case doc.Kind != yaml.DocumentNode || len(doc.Content) != 1:
		d.problems = append(d.problems, Problem{File: d.file, Message: "empty document"})
		return nil, false
	}
	root := doc.Content[0]
	if !d.CheckTree(root) {
		return nil, false
	}
	return root, true
}

// Duplicates records, at the second key, every key that a mapping anywhere under n names
// twice, with its path. Decode finds the duplicates of the fields it decodes; a caller
// that decodes only part of a document (the rest is another tool's) calls this on the
// whole of it, so two readers of the file can never see two different documents. Aliases
// are not followed: the anchor is checked where it is defined. It tells whether there
// were none.
func (d *Decoder) Duplicates(n *yaml.Node, path string) bool {
	before := len(d.problems)
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if depth > maxDepth || d.aborted {
			return // CheckTree has refused such a document already
		}
		switch n.Kind {
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			}
		case yaml.MappingNode:
			seen := map[string]*yaml.Node{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				if first, dup := seen[k.Value]; dup && k.Kind == yaml.ScalarNode {
					d.Add(k, Join(path, k.Value), duplicateMessage(k.Value, first), "remove one of them")
					continue
				}
				seen[k.Value] = k
				walk(n.Content[i+1], Join(path, k.Value), depth+1)
			}
		}
	}
	walk(n, path, 0)
	return len(d.problems) == before
}

func duplicateMessage(key string, first *yaml.Node) string {
	return fmt.Sprintf("duplicate key %q (first at line %d, column %d)", key, first.Line, first.Column)
}

// parseDocuments decodes the first document of data and tries a second one: it returns
// io.EOF for an empty stream, and next when there is more than one document.
func parseDocuments(data []byte) (doc, next *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil {
		return nil, nil, err
	}
	next = &yaml.Node{}
	switch err := dec.Decode(next); {
	case errors.Is(err, io.EOF):
		return doc, nil, nil
	case err != nil:
		return nil, nil, err
	}
	return doc, next, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Syntax errors whose position yaml.v3 leaves out or gets wrong: it prints no line for the
// first line, never a column, and for text after a flow (JSON) document the line where that
// document started.
var unlocatedErrors = []string{"exceeded max depth", "did not find expected <document start>",
	"control characters are not allowed", "invalid Unicode character"}

func (d *Decoder) syntaxProblem(data []byte, err error) Problem {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	p := Problem{File: d.file, Message: "invalid YAML: " + msg}
	for _, u := range unlocatedErrors {
		if strings.HasPrefix(msg, u) {
			if off, ok := errorOffset(data, msg); ok {
				pos := offsetPosition(data, off)
				p.Line, p.Col = pos.Line, pos.Col
				return p
			}
		}
	}
	if line > 0 {
		p.Line, p.Col = line, 1
	}
	return p
}

// errorOffset finds the byte at which the parser fails with msg: the last byte of the
// shortest prefix of data that fails the same way. The parser reads sequentially, so a
// prefix that holds the offending token fails as the whole file does and a shorter one
// fails otherwise (unterminated) or not at all; each try stops at the error, so this is
// cheap even for files near the size limit.
func errorOffset(data []byte, msg string) (int, bool) {
	same := func(k int) bool {
		_, _, err := parseDocuments(data[:k])
		if err == nil || errors.Is(err, io.EOF) {
			return false
		}
		got := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			got = m[2]
		}
		return got == msg
	}
	k := sort.Search(len(data)+1, func(k int) bool { return k > 0 && same(k) })
	if k > len(data) {
		return 0, false
	}
	return k - 1, true
}

// offsetPosition converts a byte offset into a 1-based line and column (in characters, as
// yaml.v3 counts them).
func offsetPosition(data []byte, off int) Position {
	before := data[:off]
	start := bytes.LastIndexByte(before, '\n') + 1
	return Position{Line: bytes.Count(before, []byte{'\n'}) + 1, Col: utf8.RuneCount(before[start:]) + 1}
}

func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// hasBOM16 tells whether data starts with a UTF-16 byte order mark; YAML allows UTF-16.
func hasBOM16(data []byte) bool {
	return bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE})
}
