package resolve

import (
	"strings"
	"testing"
)

// CoreOS stream metadata from a release is decoded strictly: an architecture or an
// artifact named twice, or data after the stream, is refused at its place.
func TestStreamStrict(t *testing.T) {
	for _, tc := range []struct{ name, stream, want string }{
		{"duplicate at depth", `{"architectures":{"x86_64":{},` + "\n" + `"x86_64":{}}}`, `line 2, column 1: duplicate key "x86_64" (first at line 1, column 19)`},
		{"data after it", `{"architectures":{}} {}`, "line 1, column 22: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := liveISO([]byte(tc.stream), "x86_64")
			if err == nil || !strings.Contains(err.Error(), "CoreOS stream metadata") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("liveISO = %v, want %q", err, tc.want)
			}
		})
	}
}
