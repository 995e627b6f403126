// Package testbin builds the snofactory binary once per test process, so end-to-end tests
// exercise exactly what users run: the CLI, its flags and its exit codes.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Binary builds cmd/snofactory into dir (static, with the project's build tags) and returns
// its path. Call it from TestMain with a directory the caller removes.
func Binary(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "snofactory")
	cmd := exec.Command("go", "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs", "-o", out, "./cmd/snofactory")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building snofactory: %v\n%s", err, b)
	}
	return out, nil
}

// RepoRoot is the directory holding go.mod, found from this source file.
var RepoRoot = sync.OnceValues(func() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository root")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", file)
		}
		dir = parent
	}
})

// Require returns the path of tool, failing (never skipping) the test when it is missing:
// the oracles and components the tests use are installed by `make deps`, and a test that
// quietly skips proves nothing.
func Require(t testing.TB, tool, aptPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is not on PATH: install the Debian package %s (make deps)", tool, aptPackage)
	}
	return p
}
