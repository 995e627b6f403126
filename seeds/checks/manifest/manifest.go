// Package manifest checks the extra Kubernetes manifests a blueprint or a site config
// carries: which files of a directory are manifests, how large one may be, and that every
// YAML document in one is a Kubernetes object. Both documents call it, so a manifest
// accepted in one is accepted in the other, with the same limits and messages.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// Limits on a manifests directory and its files.
const (
	MaxFiles = 500
	// MaxFileSize bounds a manifest file in a blueprint's directory: far above any
	// Kubernetes object (etcd stores at most about 1.5 MiB per object, most are a few KiB).
	MaxFileSize = 1 << 20
	// MaxInlineSize bounds a manifest a site config carries inline: its decoder bounds
	// strings at 256 KiB, so a bigger file could never travel in one.
	MaxInlineSize = 256 << 10
	MaxDocs       = 100
)

// Messages and hints callers add of their own.
const (
	Hint        = "every manifest is a Kubernetes object: apiVersion, kind and metadata.name"
	NoManifests = "the directory holds no manifests"
)

// Problem is one thing wrong with a manifests directory or a manifest; Hint may be "".
type Problem struct {
	Message string
	Hint    string
}

// ValidName tells a base name ending in .yaml, .yml or .json (case-insensitively), not hidden.
func ValidName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return name != "" && !strings.ContainsAny(name, "/\\\x00") && !strings.HasPrefix(name, ".") &&
		(ext == ".yaml" || ext == ".yml" || ext == ".json")
}

// Dir lists the manifest files directly in dir, sorted; rel names dir in messages, the way
// the user wrote it. Hidden files (.gitkeep, editor files) are skipped; any other file or
// directory is a problem, so nothing is silently left out of the seed.
func Dir(dir, rel string) ([]string, []Problem) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []Problem{{Message: fmt.Sprintf("cannot read the directory: %v", unwrapPathError(err))}}
	}
	if len(entries) > MaxFiles {
		return nil, []Problem{{Message: fmt.Sprintf("%d entries, more than the limit of %d", len(entries), MaxFiles)}}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var files []string
	var problems []Problem
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		at := filepath.ToSlash(filepath.Join(rel, name))
		switch {
		case e.IsDir():
			problems = append(problems, Problem{Message: fmt.Sprintf("%s is not a manifest: it is a directory; manifests are read from the top level only", at)})
		case !ValidName(name):
			problems = append(problems, Problem{Message: fmt.Sprintf("%s is not a manifest (.yaml, .yml or .json)", at), Hint: "move other files out of the manifests directory"})
		default:
			files = append(files, filepath.Join(dir, name))
		}
	}
	return files, problems
}

// Read reads the manifest file at path, named rel in messages, of at most limit bytes
// (MaxFileSize, or MaxInlineSize for one a site config will carry).
func Read(path, rel string, limit int64) ([]byte, *Problem) {
	b, err := smallfile.Read(path, limit)
	switch {
	case errors.Is(err, smallfile.ErrTooLarge):
		return nil, &Problem{Message: fmt.Sprintf("%s is larger than %d bytes", rel, limit)}
	case err != nil:
		return nil, &Problem{Message: fmt.Sprintf("cannot read %s: %v", rel, unwrapPathError(err))}
	}
	return b, nil
}

// Check checks every YAML document of the manifest named name and returns how many
// Kubernetes objects it holds (empty documents between --- markers are none) and what is
// wrong with it. A syntax error or too many documents stop the check.
func Check(name string, data []byte) (int, []Problem) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	n := 0
	var problems []Problem
	for i := 1; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return n, problems
		}
		if err != nil {
			msg := fmt.Sprintf("%s: invalid YAML in document %d: %s", name, i, strings.TrimPrefix(err.Error(), "yaml: "))
			return n, append(problems, Problem{Message: msg})
		}
		if i > MaxDocs {
			return n, append(problems, Problem{Message: fmt.Sprintf("%s: more than %d documents", name, MaxDocs)})
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue
		}
		root := doc.Content[0]
		at := fmt.Sprintf("%s:%d:%d", name, root.Line, root.Column)
		if root.Kind != yaml.MappingNode {
			problems = append(problems, Problem{Message: fmt.Sprintf("%s: a manifest is a mapping, got %s", at, strictyaml.Describe(root)), Hint: Hint})
			continue
		}
		n++
		if missing := missingKeys(root); len(missing) > 0 {
			problems = append(problems, Problem{Message: fmt.Sprintf("%s: manifest lacks %s", at, strings.Join(missing, ", ")), Hint: Hint})
		}
	}
}

// missingKeys lists which of apiVersion, kind and metadata.name an object lacks or leaves
// empty.
func missingKeys(root *yaml.Node) []string {
	var missing []string
	for _, key := range []string{"apiVersion", "kind"} {
		if !nonEmptyScalar(mappingValue(root, key)) {
			missing = append(missing, key)
		}
	}
	if meta := mappingValue(root, "metadata"); meta == nil || meta.Kind != yaml.MappingNode || !nonEmptyScalar(mappingValue(meta, "name")) {
		missing = append(missing, "metadata.name")
	}
	return missing
}

func nonEmptyScalar(v *yaml.Node) bool {
	return v != nil && v.Kind == yaml.ScalarNode && v.Value != "" && v.Tag != "!!null"
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// unwrapPathError drops the path from a file error: messages name the file as the user wrote it.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
