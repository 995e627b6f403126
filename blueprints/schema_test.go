package blueprints

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
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
