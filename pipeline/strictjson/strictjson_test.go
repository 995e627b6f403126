package strictjson_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

type doc struct {
	Name   string            `json:"name"`
	Size   int64             `json:"size"`
	Labels map[string]string `json:"labels"`
	Chunks []struct {
		ID string `json:"id"`
	} `json:"chunks"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		line, col int    // 0: no error expected
		want      string // in the message
	}{
		{"plain", `{"name":"a","size":1,"labels":{"x":"y"},"chunks":[{"id":"1"},{"id":"1"}]}`, 0, 0, ""},
		{"trailing white space", "{\"name\":\"a\"}\n\n \t", 0, 0, ""},
		{"same key in sibling objects", `{"chunks":[{"id":"1"},{"id":"2"}]}`, 0, 0, ""},
		{"duplicate top-level key", "{\n  \"name\": \"a\",\n  \"size\": 1,\n  \"name\": \"b\"\n}", 4, 3, `duplicate key "name" (first at line 2, column 3)`},
		{"duplicate key in a map", `{"labels":{"x":"1", "x":"2"}}`, 1, 21, `duplicate key "x"`},
		{"duplicate key in an array's object", "{\"chunks\":[\n{\"id\":\"1\"},\n{\"id\":\"2\",\"id\":\"3\"}]}", 3, 11, `duplicate key "id"`},
		{"duplicate key with escapes", `{"name":"a","n\u0061me":"b"}`, 1, 13, `duplicate key "name"`},
		{"a second document", "{\"name\":\"a\"}\n{\"name\":\"b\"}", 2, 1, "data after the JSON document"},
		{"garbage after", `{"name":"a"} x`, 1, 14, "data after the JSON document"},
		{"syntax error", "{\n\"name\": \"a\",,}", 2, 13, "invalid character"},
		{"wrong type", "{\"size\": \"big\"}", 1, 10, "cannot unmarshal string"},
		{"ends early", `{"name":`, 1, 9, "ends early"},
		{"unknown field", `{"nam":"a"}`, 0, 0, `unknown field "nam"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := strictjson.Decode([]byte(tc.in), &d)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var se *strictjson.Error
			if !errors.As(err, &se) {
				t.Fatalf("Decode = %v, want a *strictjson.Error", err)
			}
			if se.Line != tc.line || se.Col != tc.col || !strings.Contains(se.Error(), tc.want) {
				t.Errorf("Decode = %q at %d:%d, want %q at %d:%d", se.Error(), se.Line, se.Col, tc.want, tc.line, tc.col)
			}
		})
	}
}

func TestPosition(t *testing.T) {
	b := []byte("ab\ncd\n")
	for _, tc := range []struct {
		off       int64
		line, col int
	}{{0, 1, 1}, {1, 1, 2}, {3, 2, 1}, {4, 2, 2}, {6, 3, 1}, {99, 3, 1}, {-1, 1, 1}} {
		if l, c := strictjson.Position(b, tc.off); l != tc.line || c != tc.col {
			t.Errorf("Position(%d) = %d:%d, want %d:%d", tc.off, l, c, tc.line, tc.col)
		}
	}
}

// DecodeOpen skips unknown keys, and refuses what Decode refuses otherwise.
func TestDecodeOpen(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		line, col int
		want      string
	}{
		{"unknown field", `{"name":"a","future":{"x":1}}`, 0, 0, ""},
		{"duplicate key", "{\"name\":\"a\",\n\"name\":\"b\"}", 2, 1, `duplicate key "name" (first at line 1, column 2)`},
		{"duplicate unknown key at depth", `{"future":{"x":1,"x":2}}`, 1, 18, `duplicate key "x"`},
		{"data after the document", `{"name":"a"}{}`, 1, 13, "data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := strictjson.DecodeOpen([]byte(tc.in), &d)
			if tc.want == "" {
				if err != nil || d.Name != "a" {
					t.Fatalf("DecodeOpen = %v, name %q", err, d.Name)
				}
				return
			}
			var se *strictjson.Error
			if !errors.As(err, &se) || se.Line != tc.line || se.Col != tc.col || !strings.Contains(se.Error(), tc.want) {
				t.Errorf("DecodeOpen = %v, want %q at %d:%d", err, tc.want, tc.line, tc.col)
			}
		})
	}
}
