package schemagen_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/snofactory/snofactory/seeds/checks/schemagen"
)

type size int

type doc struct {
	Name string `yaml:"name" json:"jsonName" jsonschema:"required"`
	Size size   `yaml:"size,omitempty" json:"jsonSize,omitempty"`
}

func TestGenerate(t *testing.T) {
	mapper := func(t reflect.Type) *jsonschema.Schema {
		if t == reflect.TypeOf(size(0)) {
			return &jsonschema.Schema{Type: "string", Pattern: "^[0-9]+MiB$"}
		}
		return nil
	}
	tests := []struct {
		name   string
		opts   schemagen.Options
		fields []string
	}{
		{"yaml names", schemagen.Options{FieldNameTag: "yaml", Mapper: mapper, ID: "https://x/doc.json", Title: "doc", Extras: map[string]any{"x-extra": true}}, []string{"name", "size"}},
		{"json names by default", schemagen.Options{Mapper: mapper, ID: "https://x/doc.json", Title: "doc"}, []string{"jsonName", "jsonSize"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := schemagen.Generate(&doc{}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(b), "}\n") || !strings.Contains(string(b), "\n  \"$id\"") {
				t.Errorf("not indented JSON ending in a newline:\n%s", b)
			}
			var s struct {
				ID         string                     `json:"$id"`
				Title      string                     `json:"title"`
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
				Extra      *bool                      `json:"x-extra"`
			}
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if s.ID != tt.opts.ID || s.Title != tt.opts.Title {
				t.Errorf("$id %q title %q, want %q %q", s.ID, s.Title, tt.opts.ID, tt.opts.Title)
			}
			if len(s.Required) != 1 || s.Required[0] != tt.fields[0] {
				t.Errorf("required = %v, want [%s]", s.Required, tt.fields[0])
			}
			for _, f := range tt.fields {
				if _, ok := s.Properties[f]; !ok {
					t.Errorf("no property %q in %v", f, s.Properties)
				}
			}
			if !strings.Contains(string(s.Properties[tt.fields[1]]), "MiB") {
				t.Errorf("the mapper did not describe %s: %s", tt.fields[1], s.Properties[tt.fields[1]])
			}
			if (tt.opts.Extras != nil) != (s.Extra != nil) {
				t.Errorf("extras: %v", s.Extra)
			}
		})
	}
}

func TestGenerateBadSrcDir(t *testing.T) {
	_, err := schemagen.Generate(&doc{}, schemagen.Options{Package: "example.com/x", SrcDir: "/nonexistent-dir", What: "doc schema"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent-dir") {
		t.Errorf("err = %v, want one naming the directory", err)
	}
}
