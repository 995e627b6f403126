package blueprints

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
)

const (
	refBegin = "<!-- fields:begin (generated from blueprints/v1alpha1 by TestReferenceUpToDate; go generate ./blueprints) -->\n"
	refEnd   = "<!-- fields:end -->\n"
)

//go:generate go test -run TestReferenceUpToDate . -args -update

// TestReferenceUpToDate keeps the field tables in REFERENCE.md equal to the Go types and
// their doc comments, so the reference cannot drift from what the loader accepts.
func TestReferenceUpToDate(t *testing.T) {
	doc, err := os.ReadFile("REFERENCE.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte(refBegin))
	j := bytes.Index(doc, []byte(refEnd))
	if i < 0 || j < i {
		t.Fatal("REFERENCE.md lacks the generated-fields markers")
	}
	tables, err := fieldTables()
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte{}, doc[:i+len(refBegin)]...), tables...), doc[j:]...)
	if *update {
		if err := os.WriteFile("REFERENCE.md", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, want) {
		t.Fatal("REFERENCE.md field tables are out of date: run go generate ./blueprints")
	}
}

var (
	defaultRE = regexp.MustCompile(`Default: (.*?)\.?(?:\s*$|\.\s)`)
	exampleRE = regexp.MustCompile(`Example: (.*?)\.?(?:\s*$|\.\s)`)
)

// fieldTables writes one table per mapping of the schema, in document order.
func fieldTables() (string, error) {
	r := &jsonschema.Reflector{}
	if err := r.AddGoComments("github.com/snofactory/snofactory/blueprints", "v1alpha1"); err != nil {
		return "", err
	}
	comment := func(t reflect.Type, field string) string {
		k := t.PkgPath() + "." + t.Name()
		if field != "" {
			k += "." + field
		}
		return strings.Join(strings.Fields(r.CommentMap[k]), " ")
	}
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		if seen[t] {
			return
		}
		seen[t] = true
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n", path, comment(t, ""))
		b.WriteString("| Field | Type | Default | Description |\n| --- | --- | --- | --- |\n")
		var nested []func()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := fieldName(f)
			if name == "" {
				continue
			}
			desc := comment(t, f.Name)
			def := ""
			if m := defaultRE.FindStringSubmatch(desc); m != nil {
				def = m[1]
			}
			required := strings.Contains(f.Tag.Get("jsonschema"), "required")
			typ, elem := typeName(f)
			if required {
				typ += ", required"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, cell(typ), cell(def), cell(desc))
			if elem != nil {
				sub := path + "." + name
				if f.Type.Kind() == reflect.Slice {
					sub += "[]"
				}
				if path == "(top level)" {
					sub = name
				}
				nested = append(nested, func() { walk(elem, sub) })
			}
		}
		b.WriteString("\n")
		for _, n := range nested {
			n()
		}
	}
	walk(reflect.TypeOf(v1alpha1.Blueprint{}), "(top level)")
	return b.String(), nil
}

// typeName describes a field's type for the reference, and returns the struct type to
// document next, if any.
func typeName(f reflect.StructField) (string, reflect.Type) {
	t := f.Type
	enum := enumOf(f)
	switch t {
	case reflect.TypeOf(v1alpha1.Size(0)):
		return "size", nil
	case reflect.TypeOf(v1alpha1.Duration(0)):
		return "duration", nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "mapping", t
	case reflect.Map:
		return "mapping of strings", nil
	case reflect.Slice:
		e := t.Elem()
		if e.Kind() == reflect.Struct {
			return "list of mappings", e
		}
		if enum != "" {
			return "list of " + enum, nil
		}
		return "list of strings", nil
	case reflect.Bool:
		return "boolean", nil
	case reflect.Int:
		if enum != "" {
			return "integer: " + enum, nil
		}
		return "integer", nil
	}
	if enum != "" {
		return enum, nil
	}
	return "string", nil
}

func enumOf(f reflect.StructField) string {
	var vals []string
	for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		if v, ok := strings.CutPrefix(part, "enum="); ok {
			vals = append(vals, "`"+v+"`")
		}
	}
	return strings.Join(vals, " | ")
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

// TestReferenceExamplesParse checks that every "Example:" in the doc comments is present
// in the reference (they are part of the description column).
func TestReferenceExamplesParse(t *testing.T) {
	tables, err := fieldTables()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(exampleRE.FindAllString(tables, -1)); n < 15 {
		t.Errorf("only %d examples in the field tables", n)
	}
	for _, want := range []string{"### `spec.openshift`", "### `spec.vm.timeouts`", "### `spec.openshift.operators[]`", "| `kubeletCertValidity` | duration | 24h"} {
		if !strings.Contains(tables, want) {
			t.Errorf("field tables lack %q", want)
		}
	}
}
