package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"testing"
)

// maxFuncLines bounds a function, from its func keyword to its closing brace: past it,
// a function does several things that want names of their own.
const maxFuncLines = 80

// TestNoLongFunctions fails on any non-test function of the module longer than
// maxFuncLines, listing every offender with its length.
func TestNoLongFunctions(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var long []string
	for _, gf := range moduleFiles(t, false) {
		f, err := parser.ParseFile(fset, filepath.Join(root, gf.path), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.Body.Rbrace).Line
			if n := end - start + 1; n > maxFuncLines {
				long = append(long, fmt.Sprintf("%s:%d %s: %d lines", gf.path, start, funcName(fn), n))
			}
		}
	}
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("function over %d lines: %s", maxFuncLines, l)
	}
}

// funcName is Recv.Name for a method, Name for a function.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
