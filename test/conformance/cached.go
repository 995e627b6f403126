package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
)

// DefaultISOPath is where `make conformance-iso` puts the ISO, relative to the module root.
const DefaultISOPath = "build/conformance/conformance.iso"

// Cached returns the module's conformance ISO (DefaultISOPath), building it first if it
// is missing or stale. Tests in several packages call it at once; Build serialises
// them with a lock file.
func Cached(ctx context.Context, log *slog.Logger) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the snofactory module: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("finding the snofactory module: not inside it")
	}
	root := filepath.Dir(gomod)
	iso := filepath.Join(root, DefaultISOPath)
	if _, err := Build(ctx, Options{Out: iso, ModuleDir: root, Log: log}); err != nil {
		return "", err
	}
	return iso, nil
}

// lockOutput takes the build lock of the ISO at out (out+".lock", made with its
// directory if need be) and returns its release. Every build of out takes it, so
// a test's Cached and `make conformance-iso` never write the same files at once.
// Waiting ends with ctx.
func lockOutput(ctx context.Context, out string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("conformance ISO dir: %w", err)
	}
	lock, err := os.OpenFile(out+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("conformance ISO lock: %w", err)
	}
	if err := pipeline.LockFile(ctx, lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("conformance ISO: %w", err)
	}
	return func() { lock.Close() }, nil // closing drops the lock
}
