// Package diskpack stores a raw disk as content-defined chunks, casync-style: the disk's
// data is cut where a rolling hash of its content says (desync's chunker), so a change in
// one place changes only the chunks around it, and each chunk is compressed with zstd on
// its own. Ranges that hold only zeros (holes included) are neither chunked nor stored.
//
// A packed disk is two files: the pack, every distinct chunk's compressed bytes one after
// another in the order they first occur on the disk, and the index, which lists each
// chunk's offset and size on the disk, the sha256 of its raw bytes (its ID) and of its
// compressed bytes (its blob digest), and the group it belongs to: consecutive chunks of the
// pack cut where a chunk's digest says (group.go), each group one registry blob. Two disks
// that share content share chunks and most groups, which is what lets a seed move as a
// delta.
package diskpack
