package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultISOPath is where `make conformance-iso` puts the ISO, relative to the module root.
const DefaultISOPath = "build/conformance/conformance.iso"

// Cached returns the module's conformance ISO (DefaultISOPath), building it first if it
// is missing or stale. Tests in several packages call it at once, so builds are
// serialised with a lock file.
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
	if err := os.MkdirAll(filepath.Dir(iso), 0o755); err != nil {
		return "", fmt.Errorf("conformance ISO dir: %w", err)
	}
	lock, err := os.OpenFile(iso+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("conformance ISO lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("conformance ISO lock: %w", err)
	}
	if _, err := Build(ctx, Options{Out: iso, ModuleDir: root, Log: log}); err != nil {
		return "", err
	}
	return iso, nil
}
