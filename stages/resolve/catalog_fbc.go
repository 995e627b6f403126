package resolve

import (
	"bufio"
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

// fbcObject is one decoded catalog object and where it came from; exactly one of pkg,
// channel and bundle is set, after its schema.
type fbcObject struct {
	file    string
	meta    fbcMeta
	pkg     *fbcPackageDoc
	channel *fbcChannel
	bundle  *fbcBundle
}

// fbcFile is one catalog file as decoded: its objects, or why it does not parse (which
// matters only if .indexignore does not exclude it).
type fbcFile struct {
	objs []fbcObject
	err  error
}

// parseCatalog reads a file-based catalog given as its files (paths relative to the
// catalog directory), keeping every package.
func parseCatalog(files map[string][]byte) (*catalog, error) {
	decoded := make(map[string]fbcFile, len(files))
	for n, b := range files {
		objs, err := decodeObjects(n, bytes.NewReader(b), nil)
		decoded[n] = fbcFile{objs: objs, err: err}
	}
	return assembleCatalog(decoded, readIgnoreRules(files))
}

// assembleCatalog builds the catalog from its decoded files. Every file that .indexignore
// does not exclude is part of it, whatever its name, as opm reads them.
func assembleCatalog(files map[string]fbcFile, ignore ignoreRules) (*catalog, error) {
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
		if err := files[n].err; err != nil {
			return nil, err
		}
		objs = append(objs, files[n].objs...)
	}

	cat := &catalog{packages: map[string]*fbcPackage{}}
	for _, o := range objs {
		if o.pkg == nil {
			continue
		}
		p := o.pkg
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
		switch {
		case o.channel != nil:
			ch := o.channel
			pkg, err := cat.owner(o, ch.Package, ch.Name)
			if err != nil {
				return nil, err
			}
			if _, ok := pkg.channels[ch.Name]; ok {
				return nil, fmt.Errorf("%s: channel %s of package %s is declared twice", o.file, ch.Name, ch.Package)
			}
			pkg.channels[ch.Name] = ch
		case o.bundle != nil:
			b := o.bundle
			pkg, err := cat.owner(o, b.Package, b.Name)
			if err != nil {
				return nil, err
			}
			if _, ok := pkg.bundles[b.Name]; ok {
				return nil, fmt.Errorf("%s: bundle %s of package %s is declared twice", o.file, b.Name, b.Package)
			}
			pkg.bundles[b.Name] = b
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

// decodeObjects reads a catalog file as it streams by: JSON objects one after another when
// it starts with '{', YAML documents otherwise. Channels and bundles of packages want
// refuses are dropped unread (want nil keeps all); every package declaration is kept so
// errors can list them. Real catalogs run to hundreds of megabytes of bundle metadata, so
// nothing but the decoded fields stays in memory.
func decodeObjects(file string, r io.Reader, want func(pkg string) bool) ([]fbcObject, error) {
	br := bufio.NewReader(r)
	first, err := firstNonSpace(br)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []fbcObject
	add := func(i int, raw []byte) error {
		o, keep, err := decodeObject(file, i, raw, want)
		if keep {
			out = append(out, o)
		}
		return err
	}
	if first == '{' {
		err = eachJSONObject(file, br, add)
	} else {
		err = eachYAMLDocument(file, br, add)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstNonSpace returns the first byte that is not white space and leaves it unread.
func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, br.UnreadByte()
		}
	}
}

// decodeObject decodes the i-th object of file by its schema. keep is false for objects
// the stage does not read: other schemas, and channels and bundles of packages want refuses.
func decodeObject(file string, i int, raw []byte, want func(pkg string) bool) (o fbcObject, keep bool, err error) {
	o = fbcObject{file: file}
	if err := json.Unmarshal(raw, &o.meta); err != nil {
		return o, false, fmt.Errorf("%s: object %d: %w", file, i, err)
	}
	var dst any
	switch o.meta.Schema {
	case "":
		return o, false, fmt.Errorf("%s: object %d has no schema field", file, i)
	case schemaPackage:
		o.pkg = &fbcPackageDoc{}
		dst = o.pkg
	case schemaChannel:
		if want != nil && !want(o.meta.Package) {
			return o, false, nil
		}
		o.channel = &fbcChannel{}
		dst = o.channel
	case schemaBundle:
		if want != nil && !want(o.meta.Package) {
			return o, false, nil
		}
		o.bundle = &fbcBundle{}
		dst = o.bundle
	default:
		return o, false, nil // olm.deprecations and other schemas say nothing about what to pin
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return o, false, fmt.Errorf("%s: %s %s: %w", file, o.meta.Schema, o.meta.Name, err)
	}
	return o, true, nil
}

// eachJSONObject calls add with every JSON object of a stream of concatenated objects,
// numbered from 1.
func eachJSONObject(file string, r io.Reader, add func(i int, raw []byte) error) error {
	dec := json.NewDecoder(r)
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: object %d: %w", file, i, err)
		}
		if err := add(i, raw); err != nil {
			return err
		}
	}
}

// eachYAMLDocument calls add with every non-empty YAML document of a stream, as JSON,
// numbered from 1 (empty documents count).
func eachYAMLDocument(file string, r io.Reader, add func(doc int, raw []byte) error) error {
	dec := yaml.NewDecoder(r)
	for doc := 1; ; doc++ {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if v == nil {
			continue // an empty document, as between two "---"
		}
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("%s: document %d is a %T, not a catalog object", file, doc, v)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if err := add(doc, raw); err != nil {
			return err
		}
	}
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
