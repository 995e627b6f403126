package depotfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Target reads what a depot run builds: a depot file (its blueprints and its spec), every
// blueprint in a directory, a glob, or one blueprint file. Only documents of kind
// Blueprint build; a glob may match the depot file itself or other documents.
func Target(target string) ([]string, Spec, error) {
	if strings.ContainsAny(target, "*?[") {
		paths, err := blueprintsOf(".", []string{target})
		return paths, Spec{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return nil, Spec{}, err
	}
	if fi.IsDir() {
		candidates, _ := filepath.Glob(filepath.Join(target, "*.yaml"))
		paths := slices.DeleteFunc(candidates, func(p string) bool { return KindOf(p) != "Blueprint" })
		if len(paths) == 0 {
			return nil, Spec{}, fmt.Errorf("%s holds no blueprint (*.yaml of kind Blueprint)", target)
		}
		return paths, Spec{}, nil
	}
	if KindOf(target) == Kind {
		d, err := Load(target)
		if err != nil {
			return nil, Spec{}, err
		}
		paths, err := blueprintsOf(d.dir, d.Spec.Blueprints)
		if err != nil {
			return nil, Spec{}, fmt.Errorf("%s: %w", target, err)
		}
		return paths, d.Spec, nil
	}
	return []string{target}, Spec{}, nil
}

// blueprintsOf expands each glob (relative to dir) and keeps the documents of kind
// Blueprint, in order, each once. A glob that matches no blueprint is an error naming it,
// even when it matched other files: a depot of nothing would otherwise "succeed".
func blueprintsOf(dir string, globs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		paths, err := Expand(dir, []string{g})
		if err != nil {
			return nil, err
		}
		paths = slices.DeleteFunc(paths, func(p string) bool { return KindOf(p) != "Blueprint" })
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s matches no blueprint (no file of kind Blueprint)", g)
		}
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// KindOf peeks at a YAML file's top-level kind; "" when it has none or cannot be read (then
// loading it as a blueprint says why, naming the file and the cap).
func KindOf(path string) string {
	b, err := smallfile.Read(path, MaxFileSize)
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if k, ok := bytes.CutPrefix(line, []byte("kind:")); ok {
			return strings.Trim(strings.TrimSpace(string(k)), `"'`)
		}
	}
	return ""
}
