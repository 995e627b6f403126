//go:build !linux

package seed

import "os"

// openDirect: writes bypass the page cache only on Linux.
func openDirect(*os.File) *os.File { return nil }

func isDirectRefused(error) bool { return false }
