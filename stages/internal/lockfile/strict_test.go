package lockfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A lock file is decoded strictly: a key named twice (a digest, say) or anything after the
// lock is refused, with the file, the place and the key named.
func TestReadLockStrict(t *testing.T) {
	for _, tc := range []struct{ name, lock, want string }{
		{"duplicated key", `{"schemaVersion":1,` + "\n" + `"schemaVersion":1}`, `line 2, column 1: duplicate key "schemaVersion" (first at line 1, column 2)`},
		{"duplicate at depth", `{"images":[{"digest":"sha256:a","digest":"sha256:b"}]}`, `line 1, column 33: duplicate key "digest" (first at line 1, column 13)`},
		{"data after it", "{}\n{}", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "snofactory.lock")
			os.WriteFile(p, []byte(tc.lock), 0o644)
			_, err := ReadLock(p)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadLock = %v, want the file and %q", err, tc.want)
			}
		})
	}
}
