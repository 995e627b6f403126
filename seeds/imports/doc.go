// Package imports is the node side of precache: the snofactory agent uses it to load the
// images of the precache data disk into the node's containers-storage (what CRI-O reads), so
// the install never pulls them over the network.
//
// The precache stage packages an OCI image layout as a raw tar on a data disk (see
// stages/precache WriteDisk). ExtractDisk unpacks it from the block device into a scratch
// directory, verifying every blob's sha256 on the way; ImportLayout copies each image named
// in the layout's index.json (org.opencontainers.image.ref.name = the pinned pull spec,
// repo@sha256:...) into containers-storage with containers/image, under that same name, so a
// pull of the pinned reference finds it locally. ImportDisk does both and removes the scratch
// copy. The caller's main must have run reexec.Init() (containers/storage re-executes the
// binary for some drivers).
package imports
