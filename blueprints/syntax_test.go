package blueprints

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSyntaxErrorsArePositioned: syntax errors that yaml.v3 reports without a position (or
// with the wrong line) still point at the offending character.
func TestSyntaxErrorsArePositioned(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		line, col int
		msg       string
	}{
		{"deep flow nesting on line 1", strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n", 1, 10001, "exceeded max depth"},
		{"deep flow nesting in a field", "apiVersion: snofactory.io/v1alpha1\nspec: " + strings.Repeat("{a: ", 20000) + "\n", 2, 7 + 4*10000, "exceeded max depth"},
		{"text after a JSON document", `{"apiVersion": "snofactory.io/v1alpha1"} trailing`, 1, 42, "did not find expected <document start>"},
		{"text on a later line", "{\"apiVersion\": \"snofactory.io/v1alpha1\",\n \"kind\": \"Blueprint\"}\n\n  ]\n", 4, 3, "did not find expected <document start>"},
		{"invalid UTF-8 byte", "apiVersion: snofactory.io/v1alpha1\nkind: Blu\xffeprint\n", 2, 10, "not valid UTF-8"},
		{"truncated UTF-8 sequence", "# é\napiVersion: \xc3\n", 2, 13, "not valid UTF-8"},
		{"control character", "apiVersion: snofactory.io/v1alpha1\nkind: \x01\n", 2, 7, "control characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join("testdata", "x.yaml")
			_, err := Parse([]byte(tc.doc), name)
			ps := problems(t, err)
			p := ps[0]
			if p.Line != tc.line || p.Col != tc.col || !strings.Contains(p.Message, tc.msg) {
				t.Errorf("got %v, want %s:%d:%d: ...%s...", p, name, tc.line, tc.col, tc.msg)
			}
		})
	}
}
