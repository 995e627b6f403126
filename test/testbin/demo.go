package testbin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The demo blueprint's references a test replaces: its extra image's registry (served by
// make demo's demoenv) and its live ISO (built by make conformance-iso).
const (
	DemoRegistry = "127.0.0.1:5055"
	DemoImage    = DemoRegistry + "/demo/hello:1.0"
	DemoISOLine  = "path: ../build/conformance/conformance.iso"
)

// CopyDemo copies blueprints/demo.yaml and its fragments (blueprints/demo/) into
// dir/blueprints, replaces each key of edits in the copied demo.yaml by its value (each
// must be there, so a test notices when the demo changes), and returns the copy's path.
func CopyDemo(dir string, edits map[string]string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "blueprints")
	if err := os.CopyFS(filepath.Join(dst, "demo"), os.DirFS(filepath.Join(root, "blueprints", "demo"))); err != nil {
		return "", fmt.Errorf("copying the demo's fragments: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "blueprints", "demo.yaml"))
	if err != nil {
		return "", err
	}
	s := string(b)
	for old, repl := range edits {
		if !strings.Contains(s, old) {
			return "", fmt.Errorf("blueprints/demo.yaml no longer contains %q", old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	bp := filepath.Join(dst, "demo.yaml")
	return bp, os.WriteFile(bp, []byte(s), 0o644)
}
