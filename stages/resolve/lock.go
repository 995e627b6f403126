package resolve

import "github.com/snofactory/snofactory/stages/internal/lockfile"

// WriteLock writes a lock made by Resolve or Pin to path, atomically (snofactory lock).
func WriteLock(path string, l *lockfile.Lock) error { return lockfile.WriteLock(path, l) }

// ReadLock reads and checks a lock file.
func ReadLock(path string) (*lockfile.Lock, error) { return lockfile.ReadLock(path) }
