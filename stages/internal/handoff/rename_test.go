package handoff

import (
	"encoding/json"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readers lists, for each record type, the stage packages that read or write it. Renaming
// the record's fields must break the build of each of them: no stage reaches another's files
// by a string the compiler cannot check.
var readers = map[string][]string{
	"Resolve":  {"stages/resolve", "stages/render", "stages/liveiso", "stages/precache", "stages/validate", "stages/seal"},
	"Render":   {"stages/render", "stages/liveiso", "stages/validate", "stages/seal"},
	"LiveISO":  {"stages/liveiso", "stages/install"},
	"Precache": {"stages/precache", "stages/install", "stages/validate", "stages/seal"},
	"Install":  {"stages/install", "stages/validate", "stages/seal"},
	"Validate": {"stages/validate", "stages/seal"},
}

// TestRenamingARecordFieldBreaksEveryReader compiles the stages with every field of one
// record type renamed (through a build overlay, nothing is written to the tree) and checks
// that the compiler, not a run, reports each package that reads the record.
func TestRenamingARecordFieldBreaksEveryReader(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the stages once per record type")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	src, err := os.ReadFile("records.go")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("records.go")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(filepath.Dir(abs), "..", "..", "..")
	for typ, pkgs := range readers {
		t.Run(typ, func(t *testing.T) {
			renamed := renameFields(t, src, typ)
			dir := t.TempDir()
			file := filepath.Join(dir, "records.go")
			if err := os.WriteFile(file, renamed, 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{abs: file}})
			ov := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ov, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"build", "-overlay", ov}
			for _, p := range pkgs {
				args = append(args, "./"+p)
			}
			cmd := exec.Command(gobin, args...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("renaming the fields of %s still compiles %v", typ, pkgs)
			}
			for _, p := range pkgs {
				if !strings.Contains(string(out), "# github.com/snofactory/snofactory/"+p+"\n") {
					t.Errorf("%s reads %s but still compiles with its fields renamed:\n%s", p, typ, out)
				}
			}
		})
	}
}

// renameFields appends "Renamed" to every field name of the struct type typ in src.
func renameFields(t *testing.T, src []byte, typ string) []byte {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "records.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typ {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatalf("%s is not a struct", typ)
		}
		for _, fld := range st.Fields.List {
			for _, name := range fld.Names {
				name.Name += "Renamed"
				found = true
			}
		}
		return false
	})
	if !found {
		t.Fatalf("no struct %s with fields in records.go", typ)
	}
	// the record's own methods use the old names: rename their uses too
	ast.Inspect(f, func(n ast.Node) bool {
		fd, ok := n.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			return true
		}
		recv := fd.Recv.List[0]
		if id, ok := recv.Type.(*ast.Ident); !ok || id.Name != typ || len(recv.Names) == 0 {
			return false
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == recv.Names[0].Name {
					sel.Sel.Name += "Renamed"
				}
			}
			return true
		})
		return false
	})
	var b strings.Builder
	if err := format.Node(&b, fset, f); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}
