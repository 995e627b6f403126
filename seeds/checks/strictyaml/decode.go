package strictyaml

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// Bounds on what the decoder walks, so hostile files fail fast instead of hanging or
// exhausting memory. Real blueprints are a few hundred nodes deep at most ten levels.
const (
	maxDepth   = 64        // nesting of mappings and sequences
	maxNodes   = 100000    // nodes in the parsed document
	maxAliases = 100       // alias nodes in the document
	maxVisits  = 100000    // nodes visited while decoding, counting alias expansions
	maxKeyLen  = 256       // bytes in a mapping key
	maxString  = 256 << 10 // bytes in a string value; larger content belongs in a referenced file
)

// MaxProblems bounds a report: past it, more lines help nobody and cost time.
const MaxProblems = 100

// Decoder decodes one document, a yaml.Node tree, into Go values strictly: unknown keys,
// duplicate keys, wrong scalar types and unsupported YAML features are problems, all
// collected, each with its position. It records the position of every path it decodes so
// later validation errors can be located. A Decoder is used for one file, by one goroutine.
type Decoder struct {
	file     string
	noun     string   // what the document is, for messages: "blueprint", "site config"
	versions []string // apiVersions the caller reads; the last is the current one
	problems []Problem
	valPos   map[string]Position   // path -> position of its value
	valNode  map[string]*yaml.Node // path -> its value node
	keyPos   map[string]Position   // path -> position of its key
	failed   map[string]bool       // paths whose value could not be decoded
	visits   int
	aborted  bool
	fields   map[string][]string // field name -> schema paths where it is valid, for hints
	// unsupported explains a key the schema leaves out on purpose (see SetUnsupported).
	unsupported func(path string) (msg, hint string)
}

// NewDecoder returns a decoder for file (named as the user named it), a document called
// noun in messages (e.g. "blueprint"), whose apiVersion must be one of versions (the last
// is the current one) and whose Go type is root, a struct type.
func NewDecoder(file, noun string, versions []string, root reflect.Type) *Decoder {
	d := &Decoder{
		file:     file,
		noun:     noun,
		versions: versions,
		valPos:   map[string]Position{},
		valNode:  map[string]*yaml.Node{},
		keyPos:   map[string]Position{},
		failed:   map[string]bool{},
		fields:   map[string][]string{},
	}
	d.indexFields(root, "", 0)
	return d
}

// SetUnsupported installs fn to explain keys that a schema leaves out on purpose (a
// feature of a foreign format it only partly supports): for an unknown key at path, a
// non-empty msg from fn replaces the generic "unknown field" problem.
func (d *Decoder) SetUnsupported(fn func(path string) (msg, hint string)) { d.unsupported = fn }

// Add records a problem at n's position (the whole file when n is nil). Past MaxProblems it
// records a last "stopping here" problem and aborts decoding.
func (d *Decoder) Add(n *yaml.Node, path, msg, hint string) {
	if d.aborted {
		return
	}
	if len(d.problems) >= MaxProblems {
		p := Problem{File: d.file, Message: fmt.Sprintf("more than %d problems; stopping here", MaxProblems)}
		if n != nil {
			p.Line, p.Col = n.Line, n.Column
		}
		d.problems = append(d.problems, p)
		d.aborted = true
		return
	}
	p := Problem{File: d.file, Path: path, Message: msg, Hint: hint}
	if n != nil {
		p.Line, p.Col = n.Line, n.Column
	}
	d.problems = append(d.problems, p)
}

// Fail is Add, and marks path as undecodable so validation errors under it are not
// reported twice (see Suppressed).
func (d *Decoder) Fail(n *yaml.Node, path, msg, hint string) {
	d.failed[path] = true
	d.Add(n, path, msg, hint)
}

// CheckTree bounds the raw document before any decoding: depth, node and alias counts.
func (d *Decoder) CheckTree(doc *yaml.Node) bool {
	nodes, aliases := 0, 0
	var walk func(n *yaml.Node, depth int) bool
	walk = func(n *yaml.Node, depth int) bool {
		nodes++
		if nodes > maxNodes {
			d.Add(n, "", fmt.Sprintf("document has more than %d nodes", maxNodes), "a "+d.noun+" is small; split data into referenced files")
			return false
		}
		if depth > maxDepth {
			d.Add(n, "", fmt.Sprintf("document is nested deeper than %d levels", maxDepth), "")
			return false
		}
		if n.Kind == yaml.AliasNode {
			aliases++
			if aliases > maxAliases {
				d.Add(n, "", fmt.Sprintf("document has more than %d aliases", maxAliases), "write the values out instead of using anchors and aliases")
				return false
			}
			return true // the anchor itself is walked where it is defined
		}
		for _, c := range n.Content {
			if !walk(c, depth+1) {
				return false
			}
		}
		return true
	}
	return walk(doc, 0)
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// Decode decodes the document's root n into v, a non-nil pointer.
func (d *Decoder) Decode(n *yaml.Node, v any) {
	d.decode(n, reflect.ValueOf(v).Elem(), "", 0)
}

// decode decodes n into v (addressable), recording problems under path.
func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string, depth int) {
	at := n
	n, ok := d.enter(at, path, depth)
	if !ok {
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.Fail(at, path, err.Error(), "")
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(at, v.Elem(), path, depth)
	case reflect.Struct:
		d.decodeStruct(at, n, v, path, depth)
	case reflect.Map:
		d.decodeMap(at, n, v, path, depth)
	case reflect.Slice:
		d.decodeSlice(at, n, v, path, depth)
	default:
		d.decodeScalar(at, n, v, path)
	}
}

// enter resolves the aliases at at, spends one visit of the expansion budget and records
// where path's value is. It returns the node to decode, or false when there is nothing to
// decode: an error (recorded) or an empty value, which leaves the default.
func (d *Decoder) enter(at *yaml.Node, path string, depth int) (*yaml.Node, bool) {
	if d.aborted {
		return nil, false
	}
	n := at
	for n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.Fail(at, path, "alias to an unknown anchor", "")
			return nil, false
		}
		n = n.Alias
	}
	d.visits++
	if d.visits > maxVisits || depth > maxDepth {
		d.Add(at, path, "document expands to too many values (alias expansion)", "write the values out instead of using anchors and aliases")
		d.aborted = true
		return nil, false
	}
	if _, ok := d.valPos[path]; !ok {
		d.valPos[path] = Position{at.Line, at.Column}
		d.valNode[path] = n
	}
	if n.Tag != "" && !strings.HasPrefix(n.Tag, "!!") {
		d.Fail(at, path, fmt.Sprintf("unsupported YAML tag %s", n.Tag), "remove the tag")
		return nil, false
	}
	return n, !(n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// decodeSlice decodes a sequence into the slice v.
func (d *Decoder) decodeSlice(at, n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.SequenceNode {
		d.Fail(at, path, fmt.Sprintf("expected a list, got %s", Describe(n)), "write a list: one '- item' per line, or [a, b]")
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, c := range n.Content {
		d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
	}
	v.Set(s)
}

// decodeScalar decodes a string, integer or boolean, strictly: no YAML 1.1 guessing.
func (d *Decoder) decodeScalar(at, n *yaml.Node, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf("quote it to make it a string: %q", suggest.Clip(n.Value))
			}
			d.Fail(at, path, fmt.Sprintf("expected a string, got %s", Describe(n)), hint)
			return
		}
		if len(n.Value) > maxString {
			d.Fail(at, path, fmt.Sprintf("value is %d bytes long, more than %d", len(n.Value), maxString), "put large content in a file and reference it")
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		var i int64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.Fail(at, path, fmt.Sprintf("expected an integer, got %s", Describe(n)), "")
			return
		}
		if v.OverflowInt(i) || i > math.MaxInt32 || i < math.MinInt32 {
			d.Fail(at, path, fmt.Sprintf("integer %s is out of range", n.Value), "")
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.Fail(at, path, fmt.Sprintf("expected true or false, got %s", Describe(n)), "")
			return
		}
		v.SetBool(b)
	default:
		d.Fail(at, path, fmt.Sprintf("cannot decode into %s", v.Type()), "")
	}
}

// keys walks a mapping's keys, reporting non-string, merge, oversized and duplicate keys,
// and calls fn for each good pair.
func (d *Decoder) keys(n *yaml.Node, path string, fn func(k, v *yaml.Node)) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content) && !d.aborted; i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!merge"):
			d.Add(k, path, fmt.Sprintf("keys must be strings, got %s", Describe(k)), "")
			continue
		case k.Tag == "!!merge":
			d.Add(k, path, "merge keys (<<) are not supported", "write the keys out")
			continue
		case len(k.Value) > maxKeyLen:
			d.Add(k, path, fmt.Sprintf("key longer than %d bytes", maxKeyLen), "")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.Add(k, Join(path, k.Value), duplicateMessage(k.Value, first), "remove one of them")
			continue
		}
		seen[k.Value] = k
		fn(k, val)
	}
}

func (d *Decoder) decodeStruct(at, n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.Fail(at, path, fmt.Sprintf("expected a mapping, got %s", Describe(n)), "")
		return
	}
	t := v.Type()
	byName := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name := FieldName(t.Field(i))
		if name == "" {
			continue
		}
		byName[name] = i
		names = append(names, name)
	}
	d.keys(n, path, func(k, val *yaml.Node) {
		p := Join(path, k.Value)
		i, ok := byName[k.Value]
		if !ok && d.unsupported != nil {
			if msg, hint := d.unsupported(p); msg != "" {
				d.Add(k, p, msg, hint)
				return
			}
		}
		if !ok {
			hint := d.unknownHint(k.Value, path, names)
			if s := suggest.Closest(k.Value, names); s != "" {
				// The misspelt key is the user's value for s: one mistake, one report.
				d.failed[Join(path, s)] = true
			}
			d.Add(k, p, "unknown field", hint)
			return
		}
		d.keyPos[p] = Position{k.Line, k.Column}
		d.decode(val, v.Field(i), p, depth+1)
		if !d.failed[p] {
			d.checkBounds(val, t.Field(i), v.Field(i), p)
		}
	})
}

// checkBounds applies an integer field's schema minimum and maximum (its jsonschema tag)
// to the value as written, before defaults: an explicit cpus: 0 is an error, not a request
// for the default.
func (d *Decoder) checkBounds(n *yaml.Node, f reflect.StructField, v reflect.Value, path string) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Int || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return
	}
	for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		bound, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case name == "minimum" && v.Int() < bound:
			d.Fail(n, path, fmt.Sprintf("must be at least %d, got %d", bound, v.Int()), "")
		case name == "maximum" && v.Int() > bound:
			d.Fail(n, path, fmt.Sprintf("must be at most %d, got %d", bound, v.Int()), "")
		}
	}
}

func (d *Decoder) decodeMap(at, n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.Fail(at, path, fmt.Sprintf("expected a mapping, got %s", Describe(n)), "")
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.Fail(at, path, "unsupported map key type", "")
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	d.keys(n, path, func(k, val *yaml.Node) {
		p := Join(path, k.Value)
		d.keyPos[p] = Position{k.Line, k.Column}
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, e, p, depth+1)
		v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
	})
}

// unknownHint suggests a near spelling of the key here, or where else the key belongs.
func (d *Decoder) unknownHint(key, path string, names []string) string {
	if s := suggest.Closest(key, names); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	if elsewhere := d.fields[key]; len(elsewhere) > 0 {
		return fmt.Sprintf("%s belongs under %s", key, strings.Join(elsewhere, " or "))
	}
	if path == "" {
		return "valid fields here: " + strings.Join(names, ", ")
	}
	return "valid fields under " + path + ": " + strings.Join(names, ", ")
}

// indexFields records, for each field name, the schema paths of the mappings holding it.
func (d *Decoder) indexFields(t reflect.Type, path string, depth int) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			path += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > 10 || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		name := FieldName(t.Field(i))
		if name == "" {
			continue
		}
		where := path
		if where == "" {
			where = "the top level"
		}
		d.fields[name] = append(d.fields[name], where)
		d.indexFields(t.Field(i).Type, Join(path, name), depth+1)
	}
}

// FieldName is the YAML name of a struct field, or "" when the field is not part of the
// document.
func FieldName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || name == "" {
		return ""
	}
	return name
}

// Join appends a key to a path: Join("spec", "vm") is spec.vm.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Describe names a node's kind for messages, never quoting long values.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.Tag {
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "nothing"
	case "!!str":
		return "a string"
	case "!!binary":
		return "binary data"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a value tagged " + n.Tag
}
