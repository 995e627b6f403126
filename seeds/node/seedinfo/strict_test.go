package seedinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seed cluster info is decoded strictly: a key named twice or anything after it is
// refused, with the file, the place and the key named.
func TestReadStrict(t *testing.T) {
	for _, tc := range []struct{ name, info, want string }{
		{"duplicated key", `{"snoHostname":"a",` + "\n" + `"snoHostname":"b"}`, `line 2, column 1: duplicate key "snoHostname" (first at line 1, column 2)`},
		{"data after it", "{}\n{}", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "manifest.json")
			os.WriteFile(p, []byte(tc.info), 0o644)
			_, err := Read(p)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, want the file and %q", err, tc.want)
			}
		})
	}
}
