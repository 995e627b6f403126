package blueprints

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
)

// spec.outputs.signing names an encrypted private key (and optionally a passphrase file)
// relative to the blueprint; it needs a push, and a public or missing key is reported at
// its line.
func TestSigning(t *testing.T) {
	dir := fixtureDir(t)
	os.Mkdir(filepath.Join(dir, "keys"), 0o755)
	trusttest.Generate(t, filepath.Join(dir, "keys", "depot"), "pass")
	os.WriteFile(filepath.Join(dir, "keys", "pass"), []byte("pass\n"), 0o600)
	const push = "  outputs:\n    push: registry.example:5000/seeds/du:1\n"
	bp, err := parseIn(t, dir, coreos(push+"    signing:\n      key: keys/depot.key\n      passphraseFile: keys/pass\n"))
	if err != nil {
		t.Fatal(err)
	}
	if bp.Resolved.SigningKey != filepath.Join(dir, "keys", "depot.key") || bp.Resolved.SigningPassphraseFile != filepath.Join(dir, "keys", "pass") {
		t.Errorf("Resolved = %+v", bp.Resolved)
	}
	for _, tc := range []struct {
		name, doc, path, msg string
	}{
		{"no push", "  outputs:\n    signing:\n      key: keys/depot.key\n", "spec.outputs.signing", "needs spec.outputs.push"},
		{"public key", push + "    signing:\n      key: keys/depot.pub\n", "spec.outputs.signing.key", "not an encrypted sigstore private key"},
		{"missing key", push + "    signing:\n      key: keys/nope.key\n", "spec.outputs.signing.key", "does not exist"},
		{"missing passphrase file", push + "    signing:\n      key: keys/depot.key\n      passphraseFile: keys/nope\n", "spec.outputs.signing.passphraseFile", "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, coreos(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line == 0 {
						t.Errorf("%s has no position", p.Path)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
		})
	}
}
