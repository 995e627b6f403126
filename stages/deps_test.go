package stages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every stage's Deps is derived from the records it reads: the record types a stage passes
// to handoff.Deps (directly or through a []handoff.Record) are exactly the types it reads
// with handoff.Read. A stage that reads a record it does not depend on would fail at run
// time; one that depends on a record it never reads would rebuild for nothing.
func TestDepsMatchReads(t *testing.T) {
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "internal" || d.Name() == "vm" {
			continue
		}
		declared, read := handoffUses(t, d.Name())
		slices.Sort(declared)
		slices.Sort(read)
		declared, read = slices.Compact(declared), slices.Compact(read)
		if !slices.Equal(declared, read) {
			t.Errorf("stages/%s: Deps derive from %v, but it reads %v", d.Name(), declared, read)
		}
		checked++
	}
	if checked < 8 {
		t.Errorf("checked %d stage packages, want the 8 stages", checked)
	}
}

// handoffUses parses a stage package (tests excluded) and returns the record types named
// in handoff.Deps arguments or []handoff.Record literals, and those named in handoff.Read.
func handoffUses(t *testing.T, dir string) (declared, read []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	handoffType := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "handoff" {
				return sel.Sel.Name
			}
		}
		return ""
	}
	literals := func(elts []ast.Expr) {
		for _, e := range elts {
			if lit, ok := e.(*ast.CompositeLit); ok {
				if name := handoffType(lit.Type); name != "" {
					declared = append(declared, name)
				}
			}
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if handoffType(n.Fun) == "Deps" {
					literals(n.Args)
				}
				if ix, ok := n.Fun.(*ast.IndexExpr); ok && handoffType(ix.X) == "Read" {
					read = append(read, handoffType(ix.Index))
				}
			case *ast.CompositeLit:
				if at, ok := n.Type.(*ast.ArrayType); ok && handoffType(at.Elt) == "Record" {
					literals(n.Elts)
				}
			}
			return true
		})
	}
	return declared, read
}
