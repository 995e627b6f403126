package depotfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline/tektondepot"
)

const tektonDepot = `apiVersion: snofactory.io/v1alpha1
kind: Depot
metadata:
  name: d
spec:
  blueprints: [a.yaml]
  tekton:
    kubeconfig: kube/config
    namespace: builds
    claim: depot-cache
    sourceDir: .
    image: quay.io/org/snofactory@sha256:abc
    pushSecret: seed-push
    signingSecret: depot-signing
`

func writeDepotFile(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("kind: Blueprint\n"), 0o644)
	p := filepath.Join(dir, "depot.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The tekton section fills what the flags leave empty; a flag given wins, and paths are the
// depot file's.
func TestTektonUnderFlags(t *testing.T) {
	p := writeDepotFile(t, tektonDepot)
	d, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	o := tektondepot.Options{Namespace: "from-flag"}
	d.Spec.Tekton.Under(&o)
	dir := filepath.Dir(p)
	want := tektondepot.Options{Kubeconfig: filepath.Join(dir, "kube/config"), Namespace: "from-flag", Claim: "depot-cache",
		SourceDir: dir, Image: "quay.io/org/snofactory@sha256:abc", PushSecret: "seed-push", SigningSecret: "depot-signing"}
	if o != want {
		t.Errorf("options\n%+v\nwant\n%+v", o, want)
	}
	var none *Tekton // a depot file without the section changes nothing
	none.Under(&o)
	if o != want {
		t.Errorf("a missing tekton section changed %+v", o)
	}
}

// Each problem at its file:line:column with its YAML path, as the rest of the file's.
func TestTektonProblems(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown key", "claim:", "claims:", "depot.yaml:10:5: spec.tekton.claims: unknown field"},
		{"namespace", "namespace: builds", "namespace: Builds_A", "depot.yaml:9:16: spec.tekton.namespace: \"Builds_A\" is not a valid name"},
		{"claim", "claim: depot-cache", "claim: -cache", "depot.yaml:10:12: spec.tekton.claim: \"-cache\" is not a valid name"},
		{"push secret", "pushSecret: seed-push", "pushSecret: Seed/Push", "depot.yaml:13:17: spec.tekton.pushSecret"},
		{"signing secret", "signingSecret: depot-signing", "signingSecret: a_b", "depot.yaml:14:20: spec.tekton.signingSecret"},
		{"image", "image: quay.io/org/snofactory@sha256:abc", "image: \"quay.io/x y\"", "depot.yaml:12:12: spec.tekton.image: \"quay.io/x y\" holds spaces"},
		{"not a map", "  tekton:\n", "  tekton: yes\n", "depot.yaml:7:11: spec.tekton"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(tektonDepot, tc.from, tc.to, 1)
			if tc.name == "not a map" {
				doc = doc[:strings.Index(doc, "  tekton:")] + "  tekton: yes\n"
			}
			_, err := Load(writeDepotFile(t, doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
}
