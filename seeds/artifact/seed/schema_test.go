package seed

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite schema.json from the Go types")

// TestSchemaUpToDate keeps the committed schema.json equal to the schema generated from the
// Go types and their comments.
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
		t.Fatal("schema.json is out of date: run go generate ./seeds/artifact/seed")
	}
	if !bytes.Equal(Schema(), want) {
		t.Fatal("the embedded schema differs from schema.json: rebuild")
	}
}

// TestSchemaShape checks what tools rely on: closed objects, the required fields, enums and
// the digest pattern.
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
	req := map[string]bool{}
	for _, r := range s["required"].([]any) {
		req[r.(string)] = true
	}
	for _, f := range []string{"schemaVersion", "name", "target", "firmware", "blueprintDigest", "lockDigest", "disks", "created"} {
		if !req[f] {
			t.Errorf("%s is not required", f)
		}
	}
	if req["releaseVersion"] || req["credentials"] || req["sbom"] {
		t.Errorf("optional fields are required: %v", s["required"])
	}
	props := s["properties"].(map[string]any)
	if enum, _ := props["target"].(map[string]any)["enum"].([]any); len(enum) != 2 {
		t.Errorf("target enum = %v", enum)
	}
	if p := props["lockDigest"].(map[string]any)["pattern"]; p != `^sha256:[a-f0-9]{64}$` {
		t.Errorf("lockDigest pattern = %v", p)
	}
	disk := s["$defs"].(map[string]any)["Disk"].(map[string]any)
	if disk["additionalProperties"] != false {
		t.Errorf("Disk allows additional properties")
	}
	if d := disk["properties"].(map[string]any)["rawDigest"].(map[string]any)["description"]; d == nil || d == "" {
		t.Errorf("disk.rawDigest has no description")
	}
}
