package resolve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// File-based catalog schemas the stage reads; others (olm.deprecations, ...) are skipped.
const (
	schemaPackage = "olm.package"
	schemaChannel = "olm.channel"
	schemaBundle  = "olm.bundle"
)

// indexIgnore is the file in which a catalog lists files that are not part of it.
const indexIgnore = ".indexignore"

// catalog is the part of a file-based catalog the stage needs.
type catalog struct {
	ref, digest string
	packages    map[string]*fbcPackage
}

type fbcPackage struct {
	name           string
	defaultChannel string
	file           string
	channels       map[string]*fbcChannel
	bundles        map[string]*fbcBundle
}

// fbcMeta is what every catalog object has.
type fbcMeta struct {
	Schema  string `json:"schema"`
	Package string `json:"package"`
	Name    string `json:"name"`
}

type fbcPackageDoc struct {
	Name           string `json:"name"`
	DefaultChannel string `json:"defaultChannel"`
}

type fbcChannel struct {
	Name    string     `json:"name"`
	Package string     `json:"package"`
	Entries []fbcEntry `json:"entries"`
}

type fbcEntry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces"`
	Skips     []string `json:"skips"`
	SkipRange string   `json:"skipRange"`
}

type fbcBundle struct {
	Name          string       `json:"name"`
	Package       string       `json:"package"`
	Image         string       `json:"image"`
	RelatedImages []fbcRelated `json:"relatedImages"`
}

type fbcRelated struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

// fbcObject is one decoded catalog object and where it came from.
type fbcObject struct {
	file string
	meta fbcMeta
	raw  json.RawMessage
}

// parseCatalog reads a file-based catalog given as its files (paths relative to the
// catalog directory). Every file that .indexignore does not exclude is a JSON stream or a
// series of YAML documents, whatever its name, as opm reads them.
func parseCatalog(files map[string][]byte) (*catalog, error) {
	ignore := readIgnoreRules(files)
	names := make([]string, 0, len(files))
	for n := range files {
		base := path.Base(n)
		if base == indexIgnore || strings.HasPrefix(base, ".wh.") || ignore.match(n) {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var objs []fbcObject
	for _, n := range names {
		o, err := decodeObjects(n, files[n])
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}

	cat := &catalog{packages: map[string]*fbcPackage{}}
	for _, o := range objs {
		if o.meta.Schema != schemaPackage {
			continue
		}
		var p fbcPackageDoc
		if err := json.Unmarshal(o.raw, &p); err != nil {
			return nil, fmt.Errorf("%s: olm.package %s: %w", o.file, o.meta.Name, err)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("%s: an olm.package has no name", o.file)
		}
		if prev, ok := cat.packages[p.Name]; ok {
			return nil, fmt.Errorf("%s: package %s is declared twice (also in %s)", o.file, p.Name, prev.file)
		}
		cat.packages[p.Name] = &fbcPackage{name: p.Name, defaultChannel: p.DefaultChannel, file: o.file,
			channels: map[string]*fbcChannel{}, bundles: map[string]*fbcBundle{}}
	}
	for _, o := range objs {
		switch o.meta.Schema {
		case schemaChannel:
			var ch fbcChannel
			if err := json.Unmarshal(o.raw, &ch); err != nil {
				return nil, fmt.Errorf("%s: olm.channel %s: %w", o.file, o.meta.Name, err)
			}
			pkg, err := cat.owner(o, ch.Package, ch.Name)
			if err != nil {
				return nil, err
			}
			if _, ok := pkg.channels[ch.Name]; ok {
				return nil, fmt.Errorf("%s: channel %s of package %s is declared twice", o.file, ch.Name, ch.Package)
			}
			pkg.channels[ch.Name] = &ch
		case schemaBundle:
			var b fbcBundle
			if err := json.Unmarshal(o.raw, &b); err != nil {
				return nil, fmt.Errorf("%s: olm.bundle %s: %w", o.file, o.meta.Name, err)
			}
			pkg, err := cat.owner(o, b.Package, b.Name)
			if err != nil {
				return nil, err
			}
			if _, ok := pkg.bundles[b.Name]; ok {
				return nil, fmt.Errorf("%s: bundle %s of package %s is declared twice", o.file, b.Name, b.Package)
			}
			pkg.bundles[b.Name] = &b
		}
	}
	return cat, nil
}

// owner returns the package a channel or bundle belongs to.
func (cat *catalog) owner(o fbcObject, pkg, name string) (*fbcPackage, error) {
	if name == "" {
		return nil, fmt.Errorf("%s: an %s of package %q has no name", o.file, o.meta.Schema, pkg)
	}
	p, ok := cat.packages[pkg]
	if !ok {
		return nil, fmt.Errorf("%s: %s %s belongs to package %q, which has no olm.package", o.file, o.meta.Schema, name, pkg)
	}
	return p, nil
}

// decodeObjects splits a catalog file into objects: a stream of JSON objects when it starts
// with '{', YAML documents otherwise.
func decodeObjects(file string, b []byte) ([]fbcObject, error) {
	var raws []json.RawMessage
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: object %d: %w", file, len(raws)+1, err)
			}
			raws = append(raws, raw)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for doc := 1; ; doc++ {
			var v any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
			}
			if v == nil {
				continue // an empty document, as between two "---"
			}
			if _, ok := v.(map[string]any); !ok {
				return nil, fmt.Errorf("%s: document %d is a %T, not a catalog object", file, doc, v)
			}
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
			}
			raws = append(raws, raw)
		}
	}
	out := make([]fbcObject, 0, len(raws))
	for i, raw := range raws {
		o := fbcObject{file: file, raw: raw}
		if err := json.Unmarshal(raw, &o.meta); err != nil {
			return nil, fmt.Errorf("%s: object %d: %w", file, i+1, err)
		}
		if o.meta.Schema == "" {
			return nil, fmt.Errorf("%s: object %d has no schema field", file, i+1)
		}
		out = append(out, o)
	}
	return out, nil
}

// ignoreRules are the patterns of every .indexignore, each applying below its directory.
type ignoreRules []ignoreRule

type ignoreRule struct {
	dir     string // "" for the catalog root
	pattern string
	dirOnly bool // pattern ended in '/'
	rooted  bool // pattern holds a '/', so it matches the path below dir, not a name
}

// ignoreRulesFrom reads one .indexignore file. It understands the common gitignore subset:
// comments, name globs, paths relative to the file and trailing '/' for directories;
// negation ('!') is not supported and such lines are skipped.
func ignoreRulesFrom(name string, b []byte) []ignoreRule {
	dir := path.Dir(name)
	if dir == "." {
		dir = ""
	}
	var out []ignoreRule
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		r := ignoreRule{dir: dir}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimSuffix(line, "/")
		}
		if strings.Contains(line, "/") {
			r.rooted = true
			line = strings.TrimPrefix(line, "/")
		}
		r.pattern = line
		out = append(out, r)
	}
	return out
}

func readIgnoreRules(files map[string][]byte) ignoreRules {
	var rules ignoreRules
	for n, b := range files {
		if path.Base(n) == indexIgnore {
			rules = append(rules, ignoreRulesFrom(n, b)...)
		}
	}
	return rules
}

// match reports whether a catalog file is ignored.
func (rs ignoreRules) match(name string) bool {
	for _, r := range rs {
		rel := name
		if r.dir != "" {
			if !strings.HasPrefix(name, r.dir+"/") {
				continue
			}
			rel = strings.TrimPrefix(name, r.dir+"/")
		}
		parts := strings.Split(rel, "/")
		if r.rooted {
			// The pattern names a path below the .indexignore's directory: the file
			// itself or (for a directory) any prefix of its path.
			for i := 1; i <= len(parts); i++ {
				if r.dirOnly && i == len(parts) {
					break
				}
				if ok, _ := path.Match(r.pattern, strings.Join(parts[:i], "/")); ok {
					return true
				}
			}
			continue
		}
		for i, p := range parts {
			if r.dirOnly && i == len(parts)-1 {
				break
			}
			if ok, _ := path.Match(r.pattern, p); ok {
				return true
			}
		}
	}
	return false
}
