package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// rawCall is one raw file call in non-test code: the file, the function (Recv.Name for a
// method) and the call.
type rawCall struct{ file, fn, call string }

// rawCallTrees are the trees whose non-test code the raw-call allowlists cover.
var rawCallTrees = []string{"cmd", "seeds", "stages", "pipeline", "blueprints"}

// matchCall names a call of pkg.name (c is the call) that an allowlist covers, or says it
// covers none.
type matchCall func(pkg, name string, c *ast.CallExpr) (call string, ok bool)

// findRawCalls parses every non-test Go file under rawCallTrees but those skip refuses (by
// slash-separated path from the repository root) and returns the calls match names, each
// with its file and function.
func findRawCalls(t *testing.T, skip func(rel string) bool, match matchCall) map[rawCall]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found := map[rawCall]bool{}
	fset := token.NewFileSet()
	for _, top := range rawCallTrees {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if skip != nil && skip(rel) {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			for _, c := range callsIn(f, match) {
				c.file = rel
				found[c] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// callsIn lists the calls of a file's functions that match names (file left empty).
func callsIn(f *ast.File, match matchCall) []rawCall {
	var out []rawCall
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := funcName(fd)
		ast.Inspect(fd, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok {
				if call, ok := match(x.Name, sel.Sel.Name, c); ok {
					out = append(out, rawCall{fn: name, call: call})
				}
			}
			return true
		})
	}
	return out
}

// checkAllowlist compares found with allowed (named list) both ways: a call not listed
// fails with fix, what to do instead; an entry no call matches is stale, and the call it
// names no longer does what gone says.
func checkAllowlist(t *testing.T, found map[rawCall]bool, allowed map[rawCall]string, list, fix, gone string) {
	t.Helper()
	for c := range found {
		if _, ok := allowed[c]; !ok {
			t.Errorf("%s: %s calls %s: %s, or list it in %s with why it is not one", c.file, c.fn, c.call, fix, list)
		}
	}
	for c := range allowed {
		if !found[c] {
			t.Errorf("%s lists %s %s %s, which no longer %s: remove the entry", list, c.file, c.fn, c.call, gone)
		}
	}
}
