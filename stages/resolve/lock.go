package resolve

import "github.com/snofactory/snofactory/stages/internal/lockfile"

// WriteLock writes a lock made by Resolve or Pin to path, the output a user named
// (snofactory lock -o), through the output rules; it may not be one of inputs.
func WriteLock(path string, l *lockfile.Lock, inputs ...string) error {
	return lockfile.WriteOutput(path, l, inputs...)
}

// ReadLock reads and checks a lock file.
func ReadLock(path string) (*lockfile.Lock, error) { return lockfile.ReadLock(path) }
