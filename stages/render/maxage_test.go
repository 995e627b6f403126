package render

import (
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// An OpenShift render holds the installer's 24 h bootstrap certificates: its cache entry
// lives less than that. A CoreOS-style render holds nothing that expires.
func TestRenderMaxAge(t *testing.T) {
	if got := New(Options{Target: oskind.OpenShift}).MaxAge; got <= 0 || got >= 24*time.Hour {
		t.Errorf("openshift render lives %s, want less than the certificates' 24h", got)
	}
	if got := New(Options{Target: "coreos"}).MaxAge; got != 0 {
		t.Errorf("coreos render lives %s, want no limit", got)
	}
}
