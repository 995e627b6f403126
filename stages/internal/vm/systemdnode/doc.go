// Package systemdnode holds the tests that boot the systemd conformance OS
// (test/conformance BuildSystemd): a node with RHCOS's user space (systemd, NetworkManager,
// OpenSSH's first-boot key generation, chrony) on a wire the test makes, run through the
// factory's own VM runner (stages/internal/vm) so the accelerator choice and the TCG
// timeout scaling are the product's. It has no code of its own.
package systemdnode
