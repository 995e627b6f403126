package depotfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Target reads what a depot run builds: a depot file (its blueprints and its spec), every
// blueprint in a directory, a glob, or one blueprint file. Only documents of kind
// Blueprint build; a glob may match the depot file itself or other documents.
func Target(target string) ([]string, Spec, error) {
	onlyBlueprints := func(paths []string) []string {
		return slices.DeleteFunc(paths, func(p string) bool { return KindOf(p) != "Blueprint" })
	}
	if strings.ContainsAny(target, "*?[") {
		paths, err := Expand(".", []string{target})
		return onlyBlueprints(paths), Spec{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return nil, Spec{}, err
	}
	if fi.IsDir() {
		candidates, _ := filepath.Glob(filepath.Join(target, "*.yaml"))
		paths := onlyBlueprints(candidates)
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
		paths, err := d.BlueprintPaths()
		return onlyBlueprints(paths), d.Spec, err
	}
	return []string{target}, Spec{}, nil
}

// KindOf peeks at a YAML file's top-level kind; "" when it has none or cannot be read.
func KindOf(path string) string {
	b, err := os.ReadFile(path)
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
