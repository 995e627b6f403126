package depot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A depot's status file is decoded strictly: a key named twice or anything after the
// record is refused, with the file, the place and the key named.
func TestReadStatusStrict(t *testing.T) {
	for _, tc := range []struct{ name, status, want string }{
		{"duplicated key", `{"status":"succeeded",` + "\n" + `"status":"running"}`, `line 2, column 1: duplicate key "status" (first at line 1, column 2)`},
		{"duplicate at depth", `{"builds":[{"name":"a","name":"b"}]}`, `line 1, column 24: duplicate key "name" (first at line 1, column 13)`},
		{"data after it", "{}\n{}", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, StatusFile), []byte(tc.status), 0o644)
			_, err := ReadStatus(dir)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, StatusFile)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadStatus = %v, want the file and %q", err, tc.want)
			}
		})
	}
}
