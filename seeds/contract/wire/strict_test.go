package wire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What crosses the wire between host and guest is decoded strictly: a key named twice or
// anything after the object is refused, with the place and the key named.
func TestStrictWire(t *testing.T) {
	sealFile := func(t *testing.T, b string) (string, error) {
		p := filepath.Join(t.TempDir(), "seal.json")
		os.WriteFile(p, []byte(b), 0o600)
		_, err := ReadSealRequest(p)
		return p, err
	}
	facts := func(raw string) error {
		_, err := DecodeFacts(Message{Phase: PhaseFacts, Details: map[string]string{FactsDetailKey: raw}})
		return err
	}
	for _, tc := range []struct {
		name string
		read func(t *testing.T) (input string, err error)
		want string
	}{
		{"command: duplicated key", func(*testing.T) (string, error) {
			_, err := ReadCommand(strings.NewReader(`{"op":"a","op":"b"}` + "\n"))
			return "reading a command", err
		}, `line 1, column 11: duplicate key "op" (first at line 1, column 2)`},
		{"command: data after it", func(*testing.T) (string, error) {
			_, err := ReadCommand(strings.NewReader("{} {}\n"))
			return "reading a command", err
		}, "line 1, column 4: data after the JSON document"},
		{"message: duplicated key", func(*testing.T) (string, error) {
			_, err := NewDecoder(strings.NewReader(`{"seq":1,"seq":2}` + "\n")).Next()
			return "agent protocol", err
		}, `line 1, column 10: duplicate key "seq" (first at line 1, column 2)`},
		{"message: data after it", func(*testing.T) (string, error) {
			_, err := NewDecoder(strings.NewReader("{}{}\n")).Next()
			return "agent protocol", err
		}, "line 1, column 3: data after the JSON document"},
		{"seal request: duplicate at depth", func(t *testing.T) (string, error) {
			return sealFile(t, `{"version":1,"x":{"a":1,`+"\n"+`"a":2}}`)
		}, `line 2, column 1: duplicate key "a" (first at line 1, column 19)`},
		{"seal request: data after it", func(t *testing.T) (string, error) { return sealFile(t, "{}\n[]") }, "line 2, column 1: data after the JSON document"},
		{"facts: duplicated key", func(*testing.T) (string, error) {
			return "agent facts", facts(`{"version":1,"version":2}`)
		}, `line 1, column 14: duplicate key "version" (first at line 1, column 2)`},
		{"facts: data after it", func(*testing.T) (string, error) { return "agent facts", facts(`{"version":1}{}`) }, "line 1, column 14: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input, err := tc.read(t)
			if err == nil || !strings.Contains(err.Error(), input) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to name %q and say %q", err, input, tc.want)
			}
		})
	}
}
