package blueprints

import (
	"path/filepath"
	"strings"
)

// LockPath is where a blueprint's lock file goes by default: FILE.lock.json beside it
// (demo.yaml → demo.lock.json).
func LockPath(blueprint string) string {
	return strings.TrimSuffix(blueprint, filepath.Ext(blueprint)) + ".lock.json"
}
