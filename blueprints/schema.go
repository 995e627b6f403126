package blueprints

import (
	_ "embed"
	"encoding/json"
	"reflect"

	"github.com/invopop/jsonschema"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/schemagen"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

//go:generate go test -run TestSchemaUpToDate . -args -update

// SchemaID is the $id of the current version's JSON Schema.
const SchemaID = "https://snofactory.io/schemas/v1alpha1/blueprint.json"

// schemaJSON is GenerateSchema's output with descriptions from the Go doc comments;
// TestSchemaUpToDate keeps it in step with the types.
//
//go:embed schema.json
var schemaJSON []byte

// Schema returns the JSON Schema (draft 2020-12) of the current blueprint version, for
// editors and other tools.
func Schema() []byte { return append([]byte(nil), schemaJSON...) }

// GenerateSchema reflects the JSON Schema from the Go types. With srcDir (the blueprints
// package directory) set, field and type descriptions come from the doc comments there.
func GenerateSchema(srcDir string) ([]byte, error) {
	return schemagen.Generate(&v1alpha1.Blueprint{}, schemagen.Options{
		Package:      "github.com/snofactory/snofactory/blueprints",
		SrcDir:       srcDir,
		FieldNameTag: "yaml",
		Mapper:       mapType,
		// oskind.Kind shares its name with the Target struct; keep them apart in $defs.
		Namer: func(t reflect.Type) string {
			if t == reflect.TypeOf(oskind.Kind("")) {
				return "TargetName"
			}
			return t.Name()
		},
		ID:    SchemaID,
		Title: "snofactory blueprint (" + v1alpha1.APIVersion + ")",
		What:  "blueprint schema",
	})
}

// mapType describes the scalar types that YAML spells as strings. Each call returns a new
// schema because the reflector writes field descriptions into it.
func mapType(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeOf(v1alpha1.Size(0)):
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "integer", Minimum: json.Number("1"), Description: "MiB"},
			{Type: "string", Pattern: `^[0-9]+\s*([KkMmGgTt]([Ii]?[Bb])?|[Bb])?$`, Examples: []any{"512MiB", "2GiB"}},
		}}
	case reflect.TypeOf(oskind.Kind("")):
		return &jsonschema.Schema{Type: "string"} // the field's enum tag lists the values
	case reflect.TypeOf(v1alpha1.Duration(0)):
		return &jsonschema.Schema{Type: "string",
			Pattern:  `^([0-9]+d)?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))*$`,
			Examples: []any{"90s", "20m", "1h30m", "30d"}}
	}
	return nil
}
