//go:build !linux

package reconfigure

import (
	"context"
	"errors"
)

// BLKPGResize needs Linux's BLKPG ioctl; a node is Linux.
func BLKPGResize(context.Context, string, int, int64, int64) error {
	return errors.New("resizing a partition in the kernel needs Linux (BLKPG)")
}
