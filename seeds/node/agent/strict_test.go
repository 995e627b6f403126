package agent

import (
	"strings"
	"testing"
)

// The API's answers read while sealing are decoded strictly: a key named twice or data
// after the answer is refused at its place.
func TestSealAPIAnswersStrict(t *testing.T) {
	for _, tc := range []struct{ name, secret, want string }{
		{"duplicate at depth", `{"data":{"tls.crt":"a",` + "\n" + `"tls.crt":"b"}}`, `reading the router CA: line 2, column 1: duplicate key "tls.crt" (first at line 1, column 10)`},
		{"data after it", `{"data":{}} {}`, "reading the router CA: line 1, column 13: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := routerCACN([]byte(tc.secret)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("routerCACN = %v, want %q", err, tc.want)
			}
		})
	}
}
