// Package flock holds the advisory file locks (flock(2)) that snofactory's processes share a
// cache, a depot or a node's sequence file by. A lock belongs to the open file: closing it,
// or the process dying, releases it, so a killed build never leaves a lock held. Try* never
// wait and tell contention (another holder) apart from failure.
package flock

import (
	"errors"
	"os"
	"syscall"
)

// TryLock takes f's exclusive lock if it is free; ok is false, with no error, when another
// open file holds it.
func TryLock(f *os.File) (ok bool, err error) { return try(f, syscall.LOCK_EX) }

// TryShared takes a shared lock on f unless an exclusive one is held elsewhere; ok is false,
// with no error, when it is.
func TryShared(f *os.File) (ok bool, err error) { return try(f, syscall.LOCK_SH) }

// Lock waits for f's exclusive lock.
func Lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// Unlock releases f's lock while keeping f open.
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

func try(f *os.File, how int) (bool, error) {
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
