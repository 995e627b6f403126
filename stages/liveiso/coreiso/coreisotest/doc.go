// Package coreisotest gives tests the coreos-installer fixture ISOs (one per
// historical embed-area layout, kept xz-compressed under
// shared/reference/coreos-installer-iso-fixtures) as fresh files they may
// change, so the format tests, the live-iso stage tests and the CLI tests all
// read the same images the same way.
package coreisotest
