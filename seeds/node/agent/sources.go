package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// DetailSources are where a report's details come from besides key=value pairs.
type DetailSources struct {
	// Files maps a detail key to a file whose sha256, size and (if short text) content
	// are sent.
	Files [][2]string
	// Log is a log whose last lines are sent as wire.DetailLog (for a failure).
	Log string
	// IgnitionConfig: every file this Ignition config writes is described, as written
	// under FilesRoot.
	IgnitionConfig, FilesRoot string
}

// AddDetails adds the details of src to d. A file src names that cannot be read (missing,
// not a regular file, over its cap) is the caller's input, a *badinput.Error; only a
// missing log is sent as the log detail instead, since the failure it goes with matters
// more than its log.
func AddDetails(d map[string]string, src DetailSources) error {
	for _, kp := range src.Files {
		fd, err := FileDetails(kp[0], kp[1])
		if err != nil {
			return badinput.Errorf("--detail-file %s: %w", kp[0], err)
		}
		for k, v := range fd {
			d[k] = v
		}
	}
	if src.Log != "" {
		tail, err := TailLines(src.Log, wire.LogDetailLines, wire.MaxLogDetailBytes)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return badinput.Errorf("--log: %w", err)
		}
		if err != nil {
			tail = err.Error()
		}
		d[wire.DetailLog] = tail
	}
	if src.IgnitionConfig != "" {
		fd, err := IgnitionFileDetails(src.IgnitionConfig, src.FilesRoot)
		if err != nil {
			return badinput.Errorf("--ignition-config: %w", err)
		}
		for k, v := range fd {
			d[k] = v
		}
	}
	return nil
}

// DiskBySerial finds, under sysfs sys, the block device whose virtio serial is serial.
func DiskBySerial(sys, serial string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(sys, "block", "*", "serial"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == serial {
			return "/dev/" + filepath.Base(filepath.Dir(f)), nil
		}
	}
	return "", fmt.Errorf("no disk with serial %s: was this boot asked to seal?", serial)
}

// SealFromRequest seals the installed system under root as the request (the seal disk,
// or a file) asks.
func SealFromRequest(ctx context.Context, root, bootDir, request string) ([]SealStep, error) {
	req, err := wire.ReadSealRequest(request)
	if err != nil {
		return nil, err
	}
	return Sealer{Root: root, BootDir: bootDir, Request: req, Warn: os.Stderr}.Seal(ctx)
}
