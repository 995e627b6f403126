package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/manifest"
)

func TestCheck(t *testing.T) {
	obj := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	tests := []struct {
		name    string
		data    string
		objects int
		want    []string // one substring per problem, in order
	}{
		{"one object", obj, 1, nil},
		{"two objects and empty documents", "---\n" + obj + "---\n---\n" + obj, 2, nil},
		{"json", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "y"}}`, 1, nil},
		{"empty", "", 0, nil},
		{"list", "- a\n", 0, []string{"m.yaml:1:1: a manifest is a mapping, got a list"}},
		{"lacks name", "apiVersion: v1\nkind: ConfigMap\n", 1, []string{"m.yaml:1:1: manifest lacks metadata.name"}},
		{"empty name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ''}\n", 1, []string{"lacks metadata.name"}},
		{"lacks all", "a: b\n", 1, []string{"manifest lacks apiVersion, kind, metadata.name"}},
		{"every object checked", "a: b\n---\n" + obj + "---\nc: d\n", 3, []string{"m.yaml:1:1:", "m.yaml:8:1:"}},
		{"syntax", "a: [\n", 0, []string{"m.yaml: invalid YAML in document 1"}},
		{"too many documents", strings.Repeat(obj+"---\n", manifest.MaxDocs+1), manifest.MaxDocs, []string{"more than 100 documents"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, problems := manifest.Check("m.yaml", []byte(tt.data))
			if n != tt.objects {
				t.Errorf("objects = %d, want %d", n, tt.objects)
			}
			if len(problems) != len(tt.want) {
				t.Fatalf("problems = %v, want %d", problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(problems[i].Message, w) {
					t.Errorf("problem %d = %q, want ...%s...", i, problems[i].Message, w)
				}
			}
		})
	}
}

func TestDir(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"b.yaml": "x", "a.JSON": "x", "c.yml": "x", ".gitkeep": "", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	files, problems := manifest.Dir(dir, "m")
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	if strings.Join(got, ",") != "a.JSON,b.yaml,c.yml" {
		t.Errorf("files = %v, want a.JSON, b.yaml, c.yml (sorted, hidden and stray left out)", got)
	}
	want := []string{"m/notes.txt is not a manifest (.yaml, .yml or .json)", "m/sub is not a manifest: it is a directory"}
	if len(problems) != len(want) {
		t.Fatalf("problems = %v, want %v", problems, want)
	}
	for i, w := range want {
		if !strings.Contains(problems[i].Message, w) {
			t.Errorf("problem %d = %q, want ...%s...", i, problems[i].Message, w)
		}
	}
	if _, problems := manifest.Dir(filepath.Join(dir, "nope"), "nope"); len(problems) != 1 || !strings.Contains(problems[0].Message, "no such file") {
		t.Errorf("missing directory: %v", problems)
	}
}

func TestDirTooMany(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i <= manifest.MaxFiles; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.yaml", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, problems := manifest.Dir(dir, "m")
	if files != nil || len(problems) != 1 || !strings.Contains(problems[0].Message, "more than the limit of 500") {
		t.Errorf("Dir = %d files, %v", len(files), problems)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(small, []byte("a: b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, manifest.MaxInlineSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path  string
		limit int64
		want  string
	}{
		{small, manifest.MaxInlineSize, ""},
		{big, manifest.MaxInlineSize, "m/big.yaml is larger than 262144 bytes"},
		{big, manifest.MaxFileSize, ""},
		{dir, manifest.MaxFileSize, "cannot read m/dir: not a regular file"},
		{filepath.Join(dir, "nope"), manifest.MaxFileSize, "cannot read m/nope: no such file"},
	}
	for _, tt := range tests {
		rel := "m/" + filepath.Base(tt.path)
		if tt.path == dir {
			rel = "m/dir"
		}
		b, p := manifest.Read(tt.path, rel, tt.limit)
		switch {
		case tt.want == "" && (p != nil || (tt.path == small && string(b) != "a: b\n") || (tt.path == big && len(b) != manifest.MaxInlineSize+1)):
			t.Errorf("Read(%s) = %q, %v", rel, b, p)
		case tt.want != "" && (p == nil || !strings.Contains(p.Message, tt.want)):
			t.Errorf("Read(%s) problem = %v, want ...%s...", rel, p, tt.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{"a.yaml": true, "a.YML": true, "a.json": true, ".a.yaml": false, "a.txt": false, "d/a.yaml": false, "": false} {
		if got := manifest.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
