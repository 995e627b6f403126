// Package imageimport is the node side of precache: the snofactory agent uses it to load the
// images of the precache data disk into the node's containers-storage (what CRI-O reads), so
// the install never pulls them over the network.
//
// The disk's format belongs to seeds/contract/precachedisk, which the precache stage writes with.
// ImportDisk unpacks a disk from its block device into a scratch directory through
// precachedisk.Extract (every blob checked against its sha256), imports it and removes the
// scratch copy. ImportLayout copies each image the layout's index names (its pinned pull
// spec, repo@sha256:...) into containers-storage with containers/image, under that same
// name, so a pull of the pinned reference finds it locally; images already there are kept,
// so a restarted import resumes. The caller's main must have run reexec.Init()
// (containers/storage re-executes the binary for some drivers).
package imageimport
