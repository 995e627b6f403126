// Package imageimport is the node side of precache: the snofactory agent uses it to load the
// images of the precache data disk into the node's containers-storage (what CRI-O reads), so
// the install never pulls them over the network.
//
// The disk's format belongs to seeds/contract/precachedisk, which the precache stage writes
// with. ImportDisk opens the disk in place (precachedisk.Open) and copies each image the
// index names (its pinned pull spec, repo@sha256:...) with containers/image from a source that
// reads one blob at a time off the device, every blob checked against its digest; the only
// scratch space is what containers/image stages for the image being written (at most that
// image's layers), in a fixed directory below Options.ScratchDir that the next import clears.
// ImportLayout does the same from an unpacked layout.
//
// The store is the node's, as CRI-O opens it: Options.Root's /etc/containers/storage.conf
// (or /usr/share/containers/storage.conf) read with containers/storage's own parser, its
// paths below the root, with GraphRoot, RunRoot and Driver as overrides. Images already there,
// or in one of its additional image stores, are kept, so an import cut off half-way is
// finished by the next. Where the node has SELinux the store is relabeled afterwards, as
// lifecycle-agent relabels the store it precaches into; elsewhere the report says why not.
// The caller's main must have run reexec.Init() (containers/storage re-executes the binary
// for some drivers).
package imageimport
