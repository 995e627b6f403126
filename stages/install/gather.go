package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// gatherPortFile, in the stage's scratch directory, receives what the guest writes to its
// gather port (wire.GatherPortName).
const gatherPortFile = "gather-port.bin"

// LogBundle is the name, in the gather bundle, of the log bundle the guest sent: for
// OpenShift what installer-gather.sh collects (what `openshift-install gather bootstrap
// --bootstrap-in-place` fetches over SSH), for the conformance OS its install logs.
const LogBundle = "log-bundle.tar.gz"

// gather writes what a depot engineer needs to see why an install failed into
// <output>/gather/install: the console, every agent message, qemu's status, the error and
// the guest's own log bundle when it sent one.
func (f *follower) gather(cause error) (string, error) {
	dir := filepath.Join(f.env.RunDir, "gather", Name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files := map[string][]byte{
		"error.txt":   []byte(cause.Error() + "\n"),
		"agent.jsonl": encodeMessages(f.messages),
	}
	if b, err := os.ReadFile(f.console); err == nil {
		files["console.log"] = b
	}
	if b, err := os.ReadFile(filepath.Join(f.env.Scratch, gatherPortFile)); err == nil && len(b) > 0 {
		files[LogBundle] = b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := f.m.Status(ctx); err == nil {
		files["qmp-status.json"] = append(st, '\n')
	} else {
		files["qmp-status.json"] = []byte(fmt.Sprintf("{\"error\": %q}\n", err.Error()))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
