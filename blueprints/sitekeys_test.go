package blueprints

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
)

// siteKeysDir is a blueprint directory with two site key pairs (keys/a, keys/b), an SSH
// public key and a copy of keys/a.pub.
func siteKeysDir(t *testing.T) string {
	t.Helper()
	dir := fixtureDir(t)
	os.Mkdir(filepath.Join(dir, "keys"), 0o755)
	for _, name := range []string{"a", "b"} {
		trusttest.Generate(t, filepath.Join(dir, "keys", name), "pass")
	}
	a, _ := os.ReadFile(filepath.Join(dir, "keys", "a.pub"))
	os.WriteFile(filepath.Join(dir, "keys", "a-copy.pub"), a, 0o644)
	return dir
}

// spec.relocation.siteConfigKeys names public keys relative to the blueprint; each is
// checked as the hook loads it, and every problem is reported at its item.
func TestSiteConfigKeys(t *testing.T) {
	dir := siteKeysDir(t)
	bp, err := parseIn(t, dir, coreos("  relocation:\n    siteConfigKeys: [keys/a.pub, keys/b.pub]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "keys", "a.pub"), filepath.Join(dir, "keys", "b.pub")}
	if got := bp.Resolved.SiteConfigKeys; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Resolved.SiteConfigKeys = %v, want %v", got, want)
	}
	inputs := strings.Join(bp.Resolved.Inputs(), ",")
	for _, k := range want {
		if !strings.Contains(inputs, k) {
			t.Errorf("the blueprint's inputs %s lack %s", inputs, k)
		}
	}

	many := make([]string, 33)
	for i := range many {
		many[i] = "keys/a.pub"
	}
	for _, tc := range []struct {
		name, keys string
		path, msg  string
		line, col  int
	}{
		{"missing", "[keys/a.pub, keys/nope.pub]", "spec.relocation.siteConfigKeys[1]", "does not exist", 11, 34},
		{"private key", "[keys/a.key]", "spec.relocation.siteConfigKeys[0]", "never the private .key", 11, 22},
		{"SSH key", "[id.pub]", "spec.relocation.siteConfigKeys[0]", "id.pub: not a PEM public key", 11, 22},
		{"twice", "[keys/a.pub, keys/a-copy.pub]", "spec.relocation.siteConfigKeys[1]", "the same key as spec.relocation.siteConfigKeys[0]", 11, 34},
		{"directory", "[keys]", "spec.relocation.siteConfigKeys[0]", "not a regular file", 11, 22},
		{"too many", "[" + strings.Join(many, ", ") + "]", "spec.relocation.siteConfigKeys", "33 items, more than the limit of 32", 11, 21},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := coreos("  relocation:\n    siteConfigKeys: " + tc.keys + "\n")
			_, err := parseIn(t, dir, doc)
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line != tc.line || p.Col != tc.col {
						t.Errorf("%s at %d:%d, want %d:%d", p.Path, p.Line, p.Col, tc.line, tc.col)
					}
					if s := fmt.Sprint(err); !strings.Contains(s, fmt.Sprintf("blueprint.yaml:%d:%d: %s", tc.line, tc.col, tc.path)) {
						t.Errorf("the report does not read FILE:LINE:COL: PATH:\n%s", s)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
		})
	}
}

// spec.relocation.siteConfigIdentity names an age identity file, a secret no message
// quotes.
func TestSiteConfigIdentity(t *testing.T) {
	dir := fixtureDir(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "site.age"), []byte("# created by age-keygen\n"+id.String()+"\n"), 0o600)
	// Both targets: the seal places it on the node, whatever the install config is.
	for _, doc := range []string{coreos("  relocation:\n    siteConfigIdentity: site.age\n"), openshift("") + "  relocation:\n    siteConfigIdentity: site.age\n"} {
		bp, err := parseIn(t, dir, doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if bp.Resolved.SiteConfigIdentity != filepath.Join(dir, "site.age") || !slices.Contains(bp.Resolved.Inputs(), bp.Resolved.SiteConfigIdentity) {
			t.Errorf("resolved %q, inputs %v", bp.Resolved.SiteConfigIdentity, bp.Resolved.Inputs())
		}
	}
	for _, tc := range []struct{ name, doc, msg string }{
		{"missing", coreos("  relocation:\n    siteConfigIdentity: nope.age\n"), "does not exist"},
		{"not an identity", coreos("  relocation:\n    siteConfigIdentity: secrets/badchar\n"), "not an age identity file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, tc.doc)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			if strings.Contains(err.Error(), fakeSecret) {
				t.Errorf("the error quotes the file: %v", err)
			}
			for _, p := range problems(t, err) {
				if p.Path == "spec.relocation.siteConfigIdentity" && strings.Contains(p.Message, tc.msg) && p.Line > 0 && p.Col > 0 {
					return
				}
			}
			t.Errorf("want spec.relocation.siteConfigIdentity: ...%s..., got\n%v", tc.msg, err)
		})
	}
}
