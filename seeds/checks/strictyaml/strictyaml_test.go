package strictyaml_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

type doc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       spec   `yaml:"spec"`
}

type spec struct {
	Name  string   `yaml:"name"`
	Count int      `yaml:"count,omitempty"`
	Items []string `yaml:"items,omitempty"`
	Sub   *sub     `yaml:"sub,omitempty"`
}

type sub struct {
	Value string `yaml:"value"`
}

const version = "example.io/v1"

func newDecoder() *strictyaml.Decoder {
	return strictyaml.NewDecoder("doc.yaml", "thing", []string{"example.io/v0", version}, reflect.TypeOf(doc{}))
}

// decode parses and decodes data, returning the value and every problem.
func decode(data string) (doc, []strictyaml.Problem) {
	d := newDecoder()
	var v doc
	root, ok := d.Parse([]byte(data))
	if ok {
		d.Decode(root, &v)
	}
	return v, d.Problems()
}

func TestParseAndDecode(t *testing.T) {
	head := "apiVersion: " + version + "\nkind: Thing\n"
	tests := []struct {
		name      string
		data      string
		line, col int    // of the first problem; 0 for none
		path      string // of the first problem
		msg, hint string // substrings of the first problem
	}{
		{name: "valid", data: head + "spec:\n  name: a\n  count: 2\n  items: [x, y]\n  sub: {value: v}\n"},
		{"empty file", "", 1, 1, "", "empty file", "start with apiVersion: " + version},
		{"not a mapping", "- a\n", 1, 1, "", "a thing is a mapping, got a list", ""},
		{"two documents", head + "---\n" + head, 3, 1, "", "more than one YAML document", "exactly one document"},
		{"no apiVersion", "kind: Thing\n", 1, 1, "apiVersion", "required", "apiVersion: " + version},
		{"unknown apiVersion", "apiVersion: example.io/v2\n", 1, 13, "apiVersion", "unsupported apiVersion", ""},
		{"not UTF-8", head + "spec:\n  name: \xff\n", 4, 9, "", "not valid UTF-8", "save the file as UTF-8"},
		{"syntax", head + "spec: [\n", 3, 0, "", "invalid YAML", ""},
		{"unknown field", head + "spec:\n  nmae: a\n", 4, 3, "spec.nmae", "unknown field", `"name"`},
		{"duplicate key", head + "spec:\n  name: a\n  name: b\n", 5, 3, "spec.name", "duplicate key \"name\" (first at line 4, column 3)", "remove one"},
		{"string for int", head + "spec:\n  count: many\n", 4, 10, "spec.count", "expected an integer", ""},
		{"mapping for string", head + "spec:\n  name: {a: b}\n", 4, 9, "spec.name", "expected a string, got a mapping", ""},
		{"scalar for list", head + "spec:\n  items: x\n", 4, 10, "spec.items", "expected a list", ""},
		{"scalar for mapping", head + "spec: x\n", 3, 7, "spec", "expected a mapping", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, problems := decode(tt.data)
			if tt.msg == "" && tt.line == 0 {
				if len(problems) > 0 {
					t.Fatalf("problems: %v", problems)
				}
				want := doc{version, "Thing", spec{Name: "a", Count: 2, Items: []string{"x", "y"}, Sub: &sub{"v"}}}
				if !reflect.DeepEqual(v, want) {
					t.Errorf("decoded %+v, want %+v", v, want)
				}
				return
			}
			if len(problems) == 0 {
				t.Fatal("no problem reported")
			}
			p := problems[0]
			if p.File != "doc.yaml" || p.Line != tt.line || (tt.col != 0 && p.Col != tt.col) || p.Path != tt.path ||
				!strings.Contains(p.Message, tt.msg) || !strings.Contains(p.Hint, tt.hint) {
				t.Errorf("got %+v, want doc.yaml:%d:%d %s: ...%s... hint ...%s...", p, tt.line, tt.col, tt.path, tt.msg, tt.hint)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	deep := "apiVersion: " + version + "\nspec:\n  items: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n"
	aliases := "apiVersion: " + version + "\nx: &a 1\ny: [" + strings.Repeat("*a, ", 101) + "*a]\n"
	var many strings.Builder
	many.WriteString("apiVersion: " + version + "\n")
	for i := range strictyaml.MaxProblems + 5 {
		fmt.Fprintf(&many, "unknown%d: x\n", i)
	}
	tests := []struct {
		name, data, msg string
	}{
		{"too deep", deep, "nested deeper than 64 levels"},
		{"too many aliases", aliases, "more than 100 aliases"},
		{"too many problems", many.String(), "more than 100 problems; stopping here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			var v doc
			if root, ok := d.Parse([]byte(tt.data)); ok {
				d.Decode(root, &v)
			}
			ps := d.Problems()
			if len(ps) == 0 || !strings.Contains(ps[len(ps)-1].Message, tt.msg) {
				t.Fatalf("problems %v, want the last ...%s...", ps, tt.msg)
			}
			if len(ps) > strictyaml.MaxProblems+1 {
				t.Errorf("%d problems, more than the cap", len(ps))
			}
		})
	}
}

func TestReportLocateSuppressed(t *testing.T) {
	d := newDecoder()
	root, ok := d.Parse([]byte("apiVersion: " + version + "\nkind: Thing\nspec:\n  name: a\n  count: x\n  items:\n    - p\n"))
	if !ok {
		t.Fatal(d.Problems())
	}
	var v doc
	d.Decode(root, &v)
	if !d.Failed("spec.count") || d.Failed("spec.name") {
		t.Errorf("Failed: spec.count %v, spec.name %v", d.Failed("spec.count"), d.Failed("spec.name"))
	}
	if n := d.ValueNode("spec.name"); n == nil || n.Value != "a" {
		t.Errorf("ValueNode(spec.name) = %v", n)
	}
	tests := []struct {
		path string
		pos  strictyaml.Position
	}{
		{"spec.name", strictyaml.Position{Line: 4, Col: 9}},
		{"spec.items[0]", strictyaml.Position{Line: 7, Col: 7}},
		{"spec.items[0].deeper", strictyaml.Position{Line: 7, Col: 7}}, // a list item has no key
		{"spec.sub.value", strictyaml.Position{Line: 3, Col: 1}},       // the nearest key present
		{"nowhere", strictyaml.Position{Line: 1, Col: 1}},
	}
	for _, tt := range tests {
		if got := d.Locate(tt.path); got != tt.pos {
			t.Errorf("Locate(%s) = %v, want %v", tt.path, got, tt.pos)
		}
	}
	before := len(d.Problems())
	if !d.Report("spec.count", "repeats the decoding problem", "") || len(d.Problems()) != before {
		t.Error("a report under a failed path was not suppressed")
	}
	if !d.Suppressed("spec.count") || d.Suppressed("spec.name") {
		t.Error("Suppressed is wrong")
	}
	if !d.Report("spec.name", "too short", "longer") {
		t.Fatal("Report stopped early")
	}
	err := d.Err()
	var ve *strictyaml.ValidationErrors
	if !errors.As(err, &ve) || len(ve.Problems) != before+1 {
		t.Fatalf("Err = %v", err)
	}
	// Sorted by position: the report at line 4 comes before the count problem at line 5.
	if got := ve.Problems[0].String(); got != "doc.yaml:4:9: spec.name: too short; hint: longer" {
		t.Errorf("first problem = %q", got)
	}
}

func TestErrNilWithoutProblems(t *testing.T) {
	d := newDecoder()
	if err := d.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

func TestProblemStringAndFileProblem(t *testing.T) {
	tests := []struct {
		p    strictyaml.Problem
		want string
	}{
		{strictyaml.Problem{File: "f", Message: "m"}, "f: m"},
		{strictyaml.Problem{File: "f", Line: 2, Message: "m"}, "f:2:1: m"},
		{strictyaml.Problem{File: "f", Line: 2, Col: 3, Path: "a.b", Message: "m", Hint: "h"}, "f:2:3: a.b: m; hint: h"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	if got := strictyaml.FileProblem("f", "gone").Error(); got != "f: gone" {
		t.Errorf("FileProblem = %q", got)
	}
	two := &strictyaml.ValidationErrors{Problems: []strictyaml.Problem{{File: "f", Message: "a"}, {File: "f", Message: "b"}}}
	if got := two.Error(); got != "f: a\nf: b" {
		t.Errorf("Error() = %q", got)
	}
}

func TestPaths(t *testing.T) {
	parents := map[string]string{"a.b[2].c": "a.b[2]", "a.b[2]": "a.b", "a.b": "a", "a": ""}
	for p, want := range parents {
		if got := strictyaml.Parent(p); got != want {
			t.Errorf("Parent(%q) = %q, want %q", p, got, want)
		}
	}
	if strictyaml.Join("", "spec") != "spec" || strictyaml.Join("spec", "vm") != "spec.vm" {
		t.Error("Join")
	}
	fields := reflect.TypeOf(spec{})
	for i, want := range []string{"name", "count", "items", "sub"} {
		if got := strictyaml.FieldName(fields.Field(i)); got != want {
			t.Errorf("FieldName(%s) = %q, want %q", fields.Field(i).Name, got, want)
		}
	}
	if got := strictyaml.FieldName(reflect.StructField{Name: "X", Tag: `yaml:"-"`}); got != "" {
		t.Errorf("FieldName of a - tag = %q", got)
	}
}

func TestUnsupported(t *testing.T) {
	d := newDecoder()
	d.SetUnsupported(func(path string) (string, string) {
		if path == "spec.legacy" {
			return "legacy is not supported", "drop it"
		}
		return "", ""
	})
	root, ok := d.Parse([]byte("apiVersion: " + version + "\nspec:\n  legacy: 1\n  other: 2\n"))
	if !ok {
		t.Fatal(d.Problems())
	}
	var v doc
	d.Decode(root, &v)
	ps := d.Problems()
	if len(ps) != 2 || ps[0].Message != "legacy is not supported" || ps[0].Hint != "drop it" || ps[1].Message != "unknown field" {
		t.Errorf("problems = %v", ps)
	}
}

// ParseDocument and Duplicates read another tool's document, whatever its fields: one
// document only, and no key twice in any mapping, however deep.
func TestParseDocumentDuplicates(t *testing.T) {
	tests := []struct {
		name, data string
		line, col  int // of the first problem; 0 for none
		path, msg  string
	}{
		{"valid", "a: 1\nb: {c: [1, {d: 2}]}\n", 0, 0, "", ""},
		{"same key in sibling mappings", "a: {x: 1}\nb: {x: 1}\nl: [{x: 1}, {x: 2}]\n", 0, 0, "", ""},
		{"duplicated key", "a: 1\nb: 2\na: 3\n", 3, 1, "a", `duplicate key "a" (first at line 1, column 1)`},
		{"duplicate at depth", "a:\n  l:\n  - x: 1\n    y: 2\n    x: 3\n", 5, 5, "a.l[0].x", `duplicate key "x" (first at line 3, column 5)`},
		{"data after the document", "a: 1\n---\nb: 2\n", 2, 1, "", "more than one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDecoder()
			if root, ok := d.ParseDocument([]byte(tt.data)); ok {
				d.Duplicates(root, "")
			}
			ps := d.Problems()
			if tt.msg == "" {
				if len(ps) > 0 {
					t.Fatalf("problems: %v", ps)
				}
				return
			}
			if len(ps) == 0 {
				t.Fatal("no problem reported")
			}
			p := ps[0]
			if p.File != "doc.yaml" || p.Line != tt.line || p.Col != tt.col || p.Path != tt.path || !strings.Contains(p.Message, tt.msg) {
				t.Errorf("got %s, want doc.yaml:%d:%d: %s: ...%s...", p, tt.line, tt.col, tt.path, tt.msg)
			}
		})
	}
}
