package vm

import (
	"bufio"
	"strings"
	"testing"
)

// QEMU's QMP answers are decoded strictly: a key named twice or anything after the object
// on its line is refused, with the place and the key named.
func TestQMPReadStrict(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"duplicated key", `{"return":{},"return":{"status":"running"}}`, `line 1, column 14: duplicate key "return" (first at line 1, column 2)`},
		{"duplicate at depth", `{"error":{"class":"a","class":"b"}}`, `line 1, column 23: duplicate key "class" (first at line 1, column 11)`},
		{"data after it", `{"return":{}} {"return":{}}`, "line 1, column 15: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &qmp{r: bufio.NewReader(strings.NewReader(tc.line + "\r\n"))}
			_, err := q.read()
			if err == nil || !strings.Contains(err.Error(), "qmp reply") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read = %v, want a qmp reply error saying %q", err, tc.want)
			}
		})
	}
}
