package resolve

import "github.com/snofactory/snofactory/stages/internal/lockfile"

// The lock format lives in stages/internal/lockfile, shared with the stages that read it;
// these names keep the resolve stage's API as it was.

// LockSchemaVersion is bumped whenever the lock file's meaning changes.
const LockSchemaVersion = lockfile.SchemaVersion

// LockFile is the name of the lock inside the stage output.
const LockFile = lockfile.File

// Image sources recorded in Lock.Images.
const (
	SourceRelease  = lockfile.SourceRelease
	SourceOperator = lockfile.SourceOperator
	SourceExtra    = lockfile.SourceExtra
)

type (
	// Lock pins every input of a build.
	Lock = lockfile.Lock
	// LockedRelease is the release image as the blueprint named it and as it resolved.
	LockedRelease = lockfile.LockedRelease
	// LockedImage is one image the node needs, pinned by digest.
	LockedImage = lockfile.LockedImage
	// LockedISO is the live ISO.
	LockedISO = lockfile.LockedISO
	// LockedTool is a binary extracted from a component image.
	LockedTool = lockfile.LockedTool
)

// WriteLock writes the lock to path atomically.
func WriteLock(path string, l *Lock) error { return lockfile.WriteLock(path, l) }

// ReadLock reads and checks a lock file.
func ReadLock(path string) (*Lock, error) { return lockfile.ReadLock(path) }

// Verify lists every difference between a pinned lock and a fresh resolution.
func Verify(locked, fresh *Lock) []string { return lockfile.Verify(locked, fresh) }
