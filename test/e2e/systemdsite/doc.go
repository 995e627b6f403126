// Package systemdsite holds the test that tries a bonded site on the systemd conformance OS
// (test/conformance BuildSystemd) as a technician would: the OS's seed, booted with the
// product's seed boot (stages.BootSeed) and a site-config medium, its NICs on a wire the
// test makes. The node has RHCOS's user space (systemd, NetworkManager, OpenSSH's
// first-boot key generation, chrony). It has no code of its own.
package systemdsite
