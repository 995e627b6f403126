package sbom

import (
	"strings"
	"testing"
)

// A seed's SBOM from elsewhere is decoded strictly: its version named twice, or data
// after the document, is refused at its place.
func TestReadStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"duplicated key", `{"spdxVersion":"SPDX-2.3",` + "\n" + `"spdxVersion":"SPDX-9"}`, `line 2, column 1: duplicate key "spdxVersion" (first at line 1, column 2)`},
		{"data after it", `{"spdxVersion":"SPDX-2.3"}{}`, "line 1, column 27: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), "the SBOM") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read = %v, want %q", err, tc.want)
			}
		})
	}
}
