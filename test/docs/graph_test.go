package docs

import (
	"sort"
	"strings"
)

const module = "github.com/snofactory/snofactory/"

// layers are the ranks test/layout enforces, top first, each with what it owns; a package
// sits in the layer of its longest matching prefix.
var layers = []struct{ prefix, title string }{
	{"cmd", "rank 8  cmd: the CLI"},
	{"stages", "rank 7  stages: one package per stage, and what stages share"},
	{"blueprints", "rank 6  blueprints: the blueprint and depot file formats"},
	{"seeds/node", "rank 5  seeds/node: the code that runs on the node"},
	{"seeds/site", "rank 4  seeds/site: the site config and its credentials"},
	{"seeds/artifact", "rank 3  seeds/artifact: the seed, its disk, its registry form and its trust"},
	{"seeds/contract", "rank 2  seeds/contract: what host and node agree on"},
	{"seeds/checks", "rank 1  seeds/checks: checks blueprints and site configs share"},
	{"pipeline", "rank 0  pipeline: the engine"},
}

// layerOf is the index in layers of a module-relative package path, -1 for none.
func layerOf(pkg string) int {
	best, idx := -1, -1
	for i, l := range layers {
		if (pkg == l.prefix || strings.HasPrefix(pkg, l.prefix+"/")) && len(l.prefix) > best {
			best, idx = len(l.prefix), i
		}
	}
	return idx
}

// importGraph draws go list's "PKG IMPORT..." lines as the module's packages by layer, each
// with the module packages it imports. Packages under test/ are test helpers and are left
// out, as are imports from outside the module.
func importGraph(goList string) string {
	byLayer := make([][]string, len(layers))
	for _, line := range strings.Split(strings.TrimSpace(goList), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok || strings.HasPrefix(pkg, "test/") || layerOf(pkg) < 0 {
			continue
		}
		var deps []string
		for _, im := range fields[1:] {
			if d, ok := strings.CutPrefix(im, module); ok {
				deps = append(deps, d)
			}
		}
		sort.Strings(deps)
		byLayer[layerOf(pkg)] = append(byLayer[layerOf(pkg)], drawPackage(pkg, deps))
	}
	var b strings.Builder
	for i, l := range layers {
		if len(byLayer[i]) == 0 {
			continue
		}
		sort.Strings(byLayer[i])
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(l.title + "\n")
		for _, p := range byLayer[i] {
			b.WriteString(p)
		}
	}
	return b.String()
}

// drawPackage is one package and its imports, wrapped under it at 96 columns.
func drawPackage(pkg string, deps []string) string {
	line := "  " + pkg
	if len(deps) == 0 {
		return line + "\n"
	}
	var b strings.Builder
	b.WriteString(line + "\n")
	cur := "      ─► "
	for i, d := range deps {
		if i > 0 && len([]rune(cur))+len(d) > 96 {
			b.WriteString(strings.TrimRight(cur, " ") + "\n")
			cur = "         "
		}
		cur += d + " "
	}
	b.WriteString(strings.TrimRight(cur, " ") + "\n")
	return b.String()
}
