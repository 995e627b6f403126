package siteconfig

import (
	"os"
	"strings"
	"testing"
)

// install-config.yaml's additionalTrustBundle is the site's, as the image-based installer
// carries it; one that does not parse is refused at its line and column in that file.
func TestImageBasedTrustBundle(t *testing.T) {
	ca, err := os.ReadFile("testdata/corporate-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	indent := "  " + strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n  ") + "\n"
	sc, err := Load(ibiDir(t, ibiSite, ibiInstallConfig+"additionalTrustBundle: |\n"+indent))
	if err != nil || strings.TrimSpace(sc.Spec.AdditionalTrustBundle) != strings.TrimSpace(string(ca)) {
		t.Fatalf("trust bundle %q, %v", sc.Spec.AdditionalTrustBundle, err)
	}
	bad := strings.Replace(indent, "MII", "XXX", 1)
	path := ibiDir(t, ibiSite, ibiInstallConfig+"additionalTrustBundle: |\n"+bad)
	_, err = Load(path)
	if err == nil || !strings.Contains(err.Error(), "install-config.yaml:24:24: additionalTrustBundle: certificate 1 does not parse") {
		t.Errorf("err %v", err)
	}
}
