package precachedisk

import (
	"strings"
	"testing"
)

// A precache disk's layout files are decoded strictly: a key named twice or anything
// after the document is refused, with the file, the place and the key named.
func TestLayoutStrict(t *testing.T) {
	index := func(b string) func() error {
		return func() error { _, _, err := parseIndexAgent([]byte(b)); return err }
	}
	layout := func(b string) func() error { return func() error { return checkLayoutFile([]byte(b)) } }
	for _, tc := range []struct {
		name, file string
		read       func() error
		want       string
	}{
		{"index: duplicated key", "index.json", index(`{"schemaVersion":2,` + "\n" + `"schemaVersion":2}`), `line 2, column 1: duplicate key "schemaVersion" (first at line 1, column 2)`},
		{"index: duplicate at depth", "index.json", index(`{"manifests":[{"digest":"a","digest":"b"}]}`), `line 1, column 29: duplicate key "digest" (first at line 1, column 16)`},
		{"index: data after it", "index.json", index(`{"schemaVersion":2}{}`), "line 1, column 20: data after the JSON document"},
		{"oci-layout: duplicated key", "oci-layout", layout(`{"imageLayoutVersion":"1.0.0","imageLayoutVersion":"9"}`), `line 1, column 31: duplicate key "imageLayoutVersion" (first at line 1, column 2)`},
		{"oci-layout: data after it", "oci-layout", layout(`{"imageLayoutVersion":"1.0.0"} x`), "line 1, column 32: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read()
			if err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %s and %q", err, tc.file, tc.want)
			}
		})
	}
}
