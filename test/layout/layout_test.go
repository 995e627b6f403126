package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/snofactory/snofactory/"

// goFile is one Go file of the module, with its directory relative to the root and
// the module packages it imports (relative too).
type goFile struct {
	path, dir string
	imports   []string
}

func moduleFiles(t *testing.T, withTests bool) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out []goFile
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "build" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || !withTests && strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		gf := goFile{path: filepath.ToSlash(rel), dir: filepath.ToSlash(filepath.Dir(rel))}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if after, ok := strings.CutPrefix(path, module); ok {
				gf.imports = append(gf.imports, after)
			}
		}
		out = append(out, gf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("found only %d Go files under %s", len(out), root)
	}
	return out
}

// sharedLibraries are the packages under stages/ that are not stages but code several
// stages share: stages/internal (the handoff records, the lock, registries) and the
// factory-VM runner.
var sharedLibraries = map[string]bool{"internal": true, "vm": true}

// stageOf is the stage a directory belongs to (stages/<name>/...), "" for anything else,
// including the shared libraries and the graph in stages itself.
func stageOf(dir string) string {
	rest, ok := strings.CutPrefix(dir, "stages/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	if sharedLibraries[name] {
		return ""
	}
	return name
}

func TestEngineImportsNoStage(t *testing.T) {
	checked := 0
	for _, f := range moduleFiles(t, false) {
		if f.dir != "pipeline" && !strings.HasPrefix(f.dir, "pipeline/") {
			continue
		}
		checked++
		for _, im := range f.imports {
			if !strings.HasPrefix(im, "pipeline") {
				t.Errorf("%s imports %s: the engine knows nothing of stages, seeds or blueprints", f.path, im)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no files found under pipeline/")
	}
}

// The seeds (the artifact, the node agent) run outside a build: they may use the engine's
// leaf helpers (pipeline/clock, pipeline/ctxio, ...) but not the engine itself, directly or
// through a helper that links it, so the agent on a node does not carry the cache, the
// scheduler and the stage API.
func TestSeedsDoNotImportTheEngine(t *testing.T) {
	// What a package links is what its non-test files import, transitively.
	deps := map[string][]string{}
	for _, f := range moduleFiles(t, false) {
		deps[f.dir] = append(deps[f.dir], f.imports...)
	}
	checked := 0
	for _, f := range moduleFiles(t, true) {
		if f.dir != "seeds" && !strings.HasPrefix(f.dir, "seeds/") {
			continue
		}
		checked++
		for _, im := range f.imports {
			path := pathTo(deps, im, "pipeline")
			if strings.HasSuffix(f.path, "_test.go") && im != "pipeline" {
				path = nil // a test may use fixtures under test/ that link the engine
			}
			if path != nil {
				t.Errorf("%s reaches the engine package pipeline through %v: use its leaf subpackages (pipeline/clock, pipeline/ctxio, pipeline/versions)", f.path, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no files found under seeds/")
	}
}

// pathTo is the chain of imports from package from to package to, or nil if there is none.
func pathTo(deps map[string][]string, from, to string) []string {
	seen := map[string]bool{}
	var walk func(p string) []string
	walk = func(p string) []string {
		if p == to {
			return []string{p}
		}
		if seen[p] {
			return nil
		}
		seen[p] = true
		for _, d := range deps[p] {
			if rest := walk(d); rest != nil {
				return append([]string{p}, rest...)
			}
		}
		return nil
	}
	return walk(from)
}

func TestNoStageImportsAnother(t *testing.T) {
	checked := 0
	// tests included: a test that chains two stages belongs with the graph in stages/
	for _, f := range moduleFiles(t, true) {
		own := stageOf(f.dir)
		if own == "" {
			continue
		}
		checked++
		for _, im := range f.imports {
			if other := stageOf(im); other != "" && other != own {
				t.Errorf("%s (stage %s) imports %s: stages share code through stages/internal or seeds/", f.path, own, im)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no stage files found")
	}
}

// The CLI parses flags and prints: OpenShift formats, tools and defaults belong to the
// stages and seeds.
func TestCLIHasNoOpenShiftKnowledge(t *testing.T) {
	knowledge := regexp.MustCompile(`openshift-install|release-manifests|pull-secret|kubeconfig|MachineConfig|coreos-bootimages|"x86_64"`)
	for _, f := range moduleFiles(t, false) {
		if !strings.HasPrefix(f.dir, "cmd/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := knowledge.FindString(line); m != "" {
				t.Errorf("%s:%d: %q belongs in a stage, not the CLI", f.path, i+1, m)
			}
		}
	}
}

// The top of the tree is fixed: Go code lives only in these directories.
func TestGoCodeOnlyInTheFixedTopLevel(t *testing.T) {
	allowed := map[string]bool{"cmd": true, "pipeline": true, "stages": true, "blueprints": true, "seeds": true, "test": true}
	for _, f := range moduleFiles(t, true) {
		top, _, _ := strings.Cut(f.dir, "/")
		if !allowed[top] {
			t.Errorf("%s: Go code outside cmd/, pipeline/, stages/, blueprints/, seeds/ and test/", f.path)
		}
	}
}

// layers ranks the tree from the generic bottom to the CLI on top; an import may only run to
// a lower rank or stay within its own. Inside seeds/ the owners are ranked too: the shared
// checks and the host-node contracts at the bottom, then the artifact, the site's document,
// and the node's code, which reads all of them. Longest prefix wins.
var layers = []struct {
	prefix string
	rank   int
}{
	{"pipeline/", 0},
	{"seeds/checks", 1},
	{"seeds/contract", 2},
	{"seeds/artifact", 3},
	{"seeds/site", 4},
	{"seeds/node", 5},
	{"blueprints", 6},
	{"stages", 7},
	{"cmd/", 8},
}

// rankOf is the layer of a directory; pipeline itself (the engine) ranks with its helpers.
func rankOf(dir string) (int, bool) {
	best, rank := -1, 0
	for _, l := range layers {
		p := strings.TrimSuffix(l.prefix, "/")
		if (dir == p || strings.HasPrefix(dir, p+"/") || strings.HasPrefix(dir, l.prefix)) && len(l.prefix) > best {
			best, rank = len(l.prefix), l.rank
		}
	}
	return rank, best >= 0
}

func TestNoImportRunsBackUp(t *testing.T) {
	checked := 0
	for _, f := range moduleFiles(t, false) {
		own, ok := rankOf(f.dir)
		if !ok {
			continue
		}
		checked++
		for _, im := range f.imports {
			if r, ok := rankOf(im); ok && r > own {
				t.Errorf("%s imports %s, which sits above it: move the shared code down (layers: %v)", f.path, im, layers)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files", checked)
	}
}

// The seeds area shows who owns each package: the artifact, the node, the site, the
// host-node contracts, and the checks blueprints and site configs share.
func TestSeedsGroupedByOwner(t *testing.T) {
	owners := map[string]bool{"artifact": true, "node": true, "site": true, "contract": true, "checks": true}
	for _, f := range moduleFiles(t, true) {
		rest, ok := strings.CutPrefix(f.dir, "seeds/")
		if f.dir == "seeds" || !ok {
			continue
		}
		owner, _, _ := strings.Cut(rest, "/")
		if !owners[owner] {
			t.Errorf("%s: seeds/%s is not one of the owners %v", f.path, owner, owners)
		}
	}
}
