// Package coreiso reads and customizes CoreOS-style live ISO images at the
// byte level, the way `coreos-installer iso` does: it embeds an Ignition
// config (and optional NetworkManager keyfiles) into the ISO's reserved embed
// area and edits the kernel arguments held in the boot configuration's
// reserved karg areas. It knows nothing of stages or the CLI; the live-iso
// stage (package liveiso) and `snofactory iso` are thin layers over Customize.
//
// The embed area is found through /coreos/igninfo.json, else the whole extent
// of /images/ignition.img, else the legacy "coreiso+" header in the ISO 9660
// System Area. Karg areas are found through /coreos/kargs.json, else the
// legacy "coreKarg" header. Edits only ever touch those bytes, so an ISO can be
// changed in place or streamed to a new file and then patched.
//
// A config too large for the embed area (bootstrap-in-place configs often
// are) is handled by growing a copy of the ISO with xorriso: a new session
// holds a larger /images/ignition.img and an updated /coreos/igninfo.json, so
// the result still boots unattended and later tools still find the area. Customize picks
// the strategy. Changing an ISO in place means the file itself on both
// paths: a symlink's target is written, a hard link keeps its inode, and the
// file's permissions, mode and owner are honoured.
//
// NetworkManager keyfiles are embedded as given (Customization.NetworkKeyfiles).
// Converting nmstate YAML to keyfiles is not done here: nmstate's generator is
// Rust, its Go binding needs cgo and libnmstate (not packaged in Debian 12),
// and the binary must stay static.
//
// The ISO 9660 directory walk is our own small, bounded reader built on
// github.com/kdomanski/iso9660's record decoder: that library's tree walker
// follows Rock Ridge continuation areas without limits (a crafted ISO hangs
// or overflows the stack) and does not expose extent addresses, which are
// exactly what embedding needs.
package coreiso
