package reconfigure

import "testing"

func TestResultString(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{Site: "edge", SiteDigest: "sha256:s", Medium: "/dev/sr0"}, "reconfigured edge (sha256:s) from /dev/sr0"},
		{Result{Site: "edge", SiteDigest: "sha256:s", Medium: "/dev/sr0", SignedBy: "SHA256:k"},
			"reconfigured edge (sha256:s) from /dev/sr0, signed by site key SHA256:k"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
