package output

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.iso")
	if err := os.WriteFile(in, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path  string
		wantRefused bool
		wantPrefix  string
	}{
		{"no output", "", false, ""},
		{"a new file", filepath.Join(dir, "out.iso"), false, ""},
		{"a directory", dir, true, "-o "},
		{"the input", in, true, "-o "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFile("-o", tc.path, in)
			if !tc.wantRefused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !IsRefused(err) || !strings.HasPrefix(err.Error(), tc.wantPrefix) {
				t.Errorf("error %v, want a refusal starting %q", err, tc.wantPrefix)
			}
		})
	}
}
