package seed

import (
	_ "embed"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/checks/schemagen"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

//go:generate go test -run TestSchemaUpToDate . -args -update

// SchemaID is the $id of the seed manifest's JSON Schema.
const SchemaID = "https://snofactory.io/schemas/seed/v1/manifest.json"

// schemaJSON is GenerateSchema's output with the doc comments as descriptions;
// TestSchemaUpToDate keeps it in step with the types.
//
//go:embed schema.json
var schemaJSON []byte

// Schema returns the JSON Schema (draft 2020-12) of the seed manifest.
func Schema() []byte { return append([]byte(nil), schemaJSON...) }

// GenerateSchema reflects the JSON Schema from the Go types. With srcDir (this package's
// directory) set, descriptions come from the doc comments there.
func GenerateSchema(srcDir string) ([]byte, error) {
	return schemagen.Generate(&Manifest{}, schemagen.Options{
		Package: "github.com/snofactory/snofactory/seeds/artifact/seed",
		SrcDir:  srcDir,
		Mapper:  mapType,
		ID:      SchemaID,
		Title:   fmt.Sprintf("snofactory seed manifest (schemaVersion %d)", SchemaVersion),
		// What two builds of one lock may differ in is part of the format, for any reader.
		Extras: map[string]any{PerBuildKeyword: PerBuildFields()},
		What:   "seed manifest schema",
	})
}

// mapType gives digests their pattern; a new schema each call because the reflector writes
// field descriptions into it.
func mapType(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeOf(digest.Digest("")):
		return &jsonschema.Schema{Type: "string", Pattern: `^sha256:[a-f0-9]{64}$`}
	case reflect.TypeOf(oskind.Kind("")):
		return &jsonschema.Schema{Type: "string"} // the field's enum tag lists the values
	}
	return nil
}
