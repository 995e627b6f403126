package blueprints

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite schema.json from the Go types")

// TestSchemaUpToDate keeps the committed schema.json (what `snofactory schema` prints and
// editors read) equal to the schema generated from the Go types and their comments.
func TestSchemaUpToDate(t *testing.T) {
	got, err := GenerateSchema(".")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("schema.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("schema.json is out of date: run go generate ./blueprints")
	}
	if !bytes.Equal(Schema(), want) {
		t.Fatal("the embedded schema differs from schema.json: rebuild")
	}
}

// TestSchemaShape checks what editors rely on: draft 2020-12, closed objects, enums,
// patterns and descriptions.
func TestSchemaShape(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	if s["additionalProperties"] != false {
		t.Errorf("top level allows additional properties")
	}
	defs := s["$defs"].(map[string]any)
	for name, d := range defs {
		m := d.(map[string]any)
		if m["type"] == "object" && m["additionalProperties"] != false && m["properties"] != nil {
			t.Errorf("%s allows additional properties", name)
		}
	}
	target := defs["Target"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)
	if enum, _ := target["enum"].([]any); len(enum) != 2 {
		t.Errorf("target.type enum = %v", target["enum"])
	}
	if target["description"] == nil || target["description"] == "" {
		t.Errorf("target.type has no description")
	}
	meta := defs["Metadata"].(map[string]any)["properties"].(map[string]any)["name"].(map[string]any)
	if meta["pattern"] == nil {
		t.Errorf("metadata.name has no pattern")
	}
	formats := defs["Outputs"].(map[string]any)["properties"].(map[string]any)["formats"].(map[string]any)
	if items := formats["items"].(map[string]any); items["enum"] == nil {
		t.Errorf("outputs.formats items have no enum: %v", items)
	}
}

// miniValidate checks a decoded YAML value against the parts of JSON Schema the generated
// schema uses ($ref, type, properties, additionalProperties, required, enum, pattern,
// items, oneOf, minimum/maximum), returning where it fails. It is enough to show that
// editors will accept the examples and flag the same kinds of mistakes.
func miniValidate(defs map[string]any, s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		return miniValidate(defs, defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any), v, at)
	}
	if alts, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if len(miniValidate(defs, a.(map[string]any), v, at)) == 0 {
				n++
			}
		}
		if n != 1 {
			return []string{at + ": oneOf"}
		}
		return nil
	}
	var errs []string
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			errs = append(errs, at+": enum")
		}
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return append(errs, at+": not an object")
		}
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := m[r]; !ok {
				errs = append(errs, at+"/"+r+": required")
			}
		}
		for k, val := range m {
			if p, ok := props[k]; ok {
				errs = append(errs, miniValidate(defs, p.(map[string]any), val, at+"/"+k)...)
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, at+"/"+k+": additional property")
				}
			case map[string]any:
				errs = append(errs, miniValidate(defs, ap, val, at+"/"+k)...)
			}
		}
	case "array":
		l, ok := v.([]any)
		if !ok {
			return append(errs, at+": not an array")
		}
		for i, e := range l {
			errs = append(errs, miniValidate(defs, s["items"].(map[string]any), e, fmt.Sprintf("%s/%d", at, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return append(errs, at+": not a string")
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			errs = append(errs, at+": pattern")
		}
	case "integer":
		n, ok := v.(int)
		if !ok {
			return append(errs, at+": not an integer")
		}
		if min, ok := s["minimum"].(float64); ok && float64(n) < min {
			errs = append(errs, at+": minimum")
		}
		if max, ok := s["maximum"].(float64); ok && float64(n) > max {
			errs = append(errs, at+": maximum")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, at+": not a boolean")
		}
	}
	return errs
}

func asStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		out = append(out, e.(string))
	}
	return out
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func yamlValue(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSchemaAcceptsExamples: what validate accepts, editors accept too.
func TestSchemaAcceptsExamples(t *testing.T) {
	s := loadSchema(t)
	defs := s["$defs"].(map[string]any)
	for _, f := range []string{"demo.yaml", "du-profile.yaml"} {
		if errs := miniValidate(defs, s, yamlValue(t, f), ""); len(errs) > 0 {
			t.Errorf("%s: schema rejects %v", f, errs)
		}
	}
}

// TestSchemaFlagsMistakes: the shape mistakes of the corpus are flagged by the schema too,
// at the same field.
func TestSchemaFlagsMistakes(t *testing.T) {
	s := loadSchema(t)
	defs := s["$defs"].(map[string]any)
	for name, want := range map[string]string{
		"unknown-key-typo":       "/spec/target/tpye: additional property",
		"unknown-top-level":      "/specs: additional property",
		"string-got-int":         "/metadata/name: not a string",
		"name-not-dns-label":     "/metadata/name: pattern",
		"firmware-enum":          "/spec/vm/firmware: enum",
		"format-enum":            "/spec/outputs/formats/0: enum",
		"list-got-string":        "/spec/extraImages: not an array",
		"mapping-got-scalar":     "/spec/vm: not an object",
		"compute-replicas":       "/spec/openshift/compute/replicas: enum",
		"control-plane-replicas": "/spec/openshift/controlPlane/replicas: enum",
		"sha256-malformed":       "/spec/source/sha256: pattern",
		"bool-yes":               "/spec/openshift/workerIgnition: not a boolean",
		"memory-unit":            "/spec/vm/memory: oneOf",
		"duration-invalid":       "/spec/vm/timeouts/boot: pattern",
	} {
		errs := miniValidate(defs, s, yamlValue(t, "testdata/bad/"+name+".yaml"), "")
		if !slices.Contains(errs, want) {
			t.Errorf("%s: schema errors %v, want %q", name, errs, want)
		}
	}
}
