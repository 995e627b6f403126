package output

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two outputs of one command on one file would have the second replace the first while
// both are reported written: however the two paths spell that file, CheckAll refuses them.
func TestCheckAll(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "site.yaml")
	existing := filepath.Join(dir, "existing")
	os.WriteFile(in, []byte("in"), 0o644)
	os.WriteFile(existing, []byte("old"), 0o644)
	os.Symlink(existing, filepath.Join(dir, "link"))
	os.Link(existing, filepath.Join(dir, "hard"))
	os.Symlink("new-target", filepath.Join(dir, "dangling"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "sublink"))
	j := func(p string) string { return filepath.Join(dir, p) }
	for _, tc := range []struct {
		name, a, b, refused string
	}{
		{"two new files", j("a.iso"), j("a.iso.creds"), ""},
		{"one output not given", j("a.iso"), "", ""},
		{"the same new path", j("a.iso"), j("a.iso"), "--creds names the same file as -o"},
		{"the same path spelled twice", j("a.iso"), j("sub/../a.iso"), "names the same file"},
		{"a symlink and its target", j("existing"), j("link"), "names the same file"},
		{"a hard link", j("existing"), j("hard"), "names the same file"},
		{"a dangling symlink and its target", j("dangling"), j("new-target"), "names the same file"},
		{"through a linked directory", j("sub/x"), j("sublink/x"), "names the same file"},
		{"the input", j("a.iso"), in, "is this command's input"},
		{"a character device", j("a.iso"), "/dev/null", "is a character device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAll([]Named{{"-o", tc.a}, {"--creds", tc.b}}, in)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !IsRefused(err) || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("err = %v, want a refusal with %q", err, tc.refused)
			}
		})
	}
}

func TestCheckApart(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cache := filepath.Join(dir, "cache")
	link := filepath.Join(dir, "link")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		a, b, says string
	}{
		{"apart", out, cache, ""},
		{"siblings sharing a prefix", out, out + "-cache", ""},
		{"the same", out, out, "same directory"},
		{"the same through a symlink", link, out, "same directory"},
		{"inside", out, filepath.Join(out, "cache"), "is inside"},
		{"inside through a symlink", out, filepath.Join(link, "x", "cache"), "is inside"},
		{"containing", filepath.Join(cache, "out"), cache, "holds"},
		{"a relative path", ".", "sub", "is inside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckApart(Named{"--output-dir", tc.a}, Named{"--cache-dir", tc.b})
			if tc.says == "" {
				if err != nil {
					t.Fatalf("CheckApart: %v", err)
				}
				return
			}
			if !IsRefused(err) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "--output-dir") || !strings.Contains(err.Error(), "--cache-dir") {
				t.Fatalf("CheckApart = %v, want a refusal naming both flags and %q", err, tc.says)
			}
		})
	}
}
