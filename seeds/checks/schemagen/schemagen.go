// Package schemagen reflects the JSON Schema of a document's Go types, with the doc
// comments of their package as descriptions. The blueprint and the seed manifest both
// publish a schema made this way, so the two are generated, indented and checked the same.
package schemagen

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// Options say what to reflect and how to name it.
type Options struct {
	// Package is the import path whose doc comments describe the types, read from SrcDir
	// when SrcDir is not "".
	Package, SrcDir string
	// FieldNameTag is the struct tag that names fields ("" for json).
	FieldNameTag string
	// Mapper describes types the reflector cannot (scalars spelled as strings); Namer
	// names types in $defs. Either may be nil.
	Mapper func(reflect.Type) *jsonschema.Schema
	Namer  func(reflect.Type) string
	// ID and Title are the schema's $id and title; Extras are further top-level keywords.
	ID, Title string
	Extras    map[string]any
	// What names the document in errors ("blueprint schema").
	What string
}

// Generate returns the indented JSON Schema of v's type, ending in a newline.
func Generate(v any, o Options) ([]byte, error) {
	r := &jsonschema.Reflector{
		FieldNameTag:               o.FieldNameTag,
		RequiredFromJSONSchemaTags: true,
		ExpandedStruct:             true,
		Mapper:                     o.Mapper,
		Namer:                      o.Namer,
	}
	if o.SrcDir != "" {
		if err := r.AddGoComments(o.Package, o.SrcDir); err != nil {
			return nil, fmt.Errorf("reading doc comments in %s: %w", o.SrcDir, err)
		}
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID(o.ID)
	s.Title = o.Title
	if o.Extras != nil {
		s.Extras = o.Extras
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", o.What, err)
	}
	return append(b, '\n'), nil
}
