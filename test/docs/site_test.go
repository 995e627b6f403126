package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/test/testbin"
)

// readmeSite is the site config the README shows in part: a bond and a VLAN.
const readmeSite = "blueprints/du-profile/store-0042.yaml"

// The README's bond-and-VLAN site is a real file that validates, and the network the README
// shows is that file's, word for word.
func TestREADMESiteValidates(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	site, err := os.ReadFile(filepath.Join(root, readmeSite))
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, b := range parsePage("README.md", string(readme)).blocks {
		if b.lang == "yaml" && strings.Contains(strings.Join(b.lines, "\n"), "type: bond") {
			shown = append(shown, strings.Join(b.lines, "\n")+"\n")
		}
	}
	if len(shown) != 1 {
		t.Fatalf("the README shows %d yaml blocks with a bond, want 1", len(shown))
	}
	if !strings.Contains(string(site), shown[0]) {
		t.Errorf("the README's network is not %s's:\n%s", readmeSite, shown[0])
	}
	sc, err := siteconfig.Load(filepath.Join(root, readmeSite))
	if err != nil {
		t.Fatalf("%s: %v", readmeSite, err)
	}
	types := map[string]int{}
	for _, iface := range sc.Spec.Network.Interfaces {
		types[iface.Type]++
	}
	if types["bond"] != 1 || types["vlan"] != 1 || types["ethernet"] != 2 {
		t.Errorf("%s has interfaces %v, want two NICs, a bond and a VLAN", readmeSite, types)
	}
}
