package blueprints

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The blueprint shown in docs/blueprints.md must stay valid as the schema evolves.
func TestDocsBlueprintValidates(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "docs", "blueprints.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/blueprints.md has no yaml example")
	}
	dir := t.TempDir()
	files := map[string]string{
		"bp.yaml":                 example,
		"pull-secret.json":        `{"auths": {"quay.io": {"auth": "dXNlcjpwYXNz"}}}`,
		"id_ed25519.pub":          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI readme@example\n",
		"sctp.bu":                 "variant: openshift\nversion: 4.16.0\nmetadata:\n  name: 03-sctp\n  labels:\n    machineconfiguration.openshift.io/role: master\n",
		"extra-manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadFile(filepath.Join(dir, "bp.yaml")); err != nil {
		t.Fatalf("the blueprint of docs/blueprints.md is invalid:\n%v", err)
	}
}
