// Package precachedisk is the precache data disk: the format in which the factory hands a
// build's images to the node. Both sides live here, so the disk the precache stage writes and
// the disk the node's agent reads cannot drift apart.
//
// A disk holds an OCI image layout (oci-layout with version 1.0.0, index.json, blobs/sha256/)
// whose index.json names every image by its pinned reference (repo@sha256:...) in the
// org.opencontainers.image.ref.name annotation. The layout is stored as an uncompressed POSIX
// tar written straight onto the raw disk, oci-layout first (it is the disk's magic), then
// optionally the node agent (agent/snofactory, its digest recorded in index.json), then
// index.json, then the blobs in name order, zero-padded to a MiB. Entries carry fixed owners,
// modes and times, so the same layout always gives the same disk. A tar needs no root, loop
// device or filesystem driver on either side: the node reads it off the block device.
//
// Writers build the layout with CreateLayout, BlobPath, WriteIndex and AddAgent, and pack it
// with Write.
// Readers unpack a disk with Extract, which refuses anything the writer cannot produce (other
// names, links, duplicate or missing entries, another layout version, a truncated archive) and
// checks every blob against its digest, and read an unpacked layout with ReadIndex.
package precachedisk
