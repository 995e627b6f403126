package reconfigure

import (
	"context"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BLKPGResize is the PartitionResizer of a Linux node: the BLKPG_RESIZE_PARTITION ioctl
// on the disk, as util-linux's partx_resize_partition (include/partx.h) makes it. The
// kernel refuses a start that moved or a length past the disk (block/ioctl.c
// blkpg_do_ioctl, block/partitions/core.c bdev_resize_partition).
func BLKPGResize(_ context.Context, disk string, number int, start, sectors int64) error {
	f, err := os.OpenFile(disk, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	part := unix.BlkpgPartition{Start: start * 512, Length: sectors * 512, Pno: int32(number)}
	arg := unix.BlkpgIoctlArg{Op: unix.BLKPG_RESIZE_PARTITION, Datalen: int32(unsafe.Sizeof(part)), Data: (*byte)(unsafe.Pointer(&part))}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return fmt.Errorf("BLKPG_RESIZE_PARTITION on %s, partition %d: %w", disk, number, errno)
	}
	return nil
}
