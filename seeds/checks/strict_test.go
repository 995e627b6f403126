package checks

import (
	"strings"
	"testing"
)

// A pull secret that names a registry twice holds two credentials for it, and which one a
// tool uses depends on its JSON reader: it is refused at the second key, quoting no
// credential.
func TestPullSecretDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ name, secret, want string }{
		{"registry named twice", `{"auths":{"quay.io":{"auth":"c2VjcmV0MQ=="},` + "\n" + `"quay.io":{"auth":"c2VjcmV0Mg=="}}}`,
			`the pull secret: line 2, column 1: duplicate key "quay.io" (first at line 1, column 11)`},
		{"auth named twice", `{"auths":{"quay.io":{"auth":"c2VjcmV0MQ==","auth":"c2VjcmV0Mg=="}}}`,
			`the pull secret: line 1, column 44: duplicate key "auth" (first at line 1, column 22)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PullSecret([]byte(tc.secret))
			if !strings.Contains(got, tc.want) {
				t.Errorf("PullSecret = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "c2VjcmV0") {
				t.Errorf("a credential is quoted back: %q", got)
			}
		})
	}
}
