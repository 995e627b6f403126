// Package conformance builds the conformance OS: a minimal live ISO made from Debian
// packages (kernel, busybox, the real ignition binary, extlinux) plus the static
// snofactory binary in agent mode, laid out like a CoreOS live ISO.
//
// It exists so every stage can be exercised end to end on machines that have no RHCOS
// image: the ISO boots with BIOS (isolinux, also as a hybrid disk) and UEFI (GRUB), and
// has the /images/ignition.img embed area, /coreos/igninfo.json, /coreos/kargs.json
// pointing at real karg areas in isolinux/isolinux.cfg and EFI/BOOT/grub.cfg, and
// /coreos/features.json. At boot its init runs Ignition's fetch-offline and files stages
// on /config.ign, reports every phase to the host over virtio-serial, and, when
// coreos.inst.install_dev=DEV is on the kernel command line, installs itself to DEV
// (ext2 + extlinux, BIOS boot, with the config as /boot/ignition/config.ign) and reboots
// into it, where Ignition runs once more on the first boot from disk.
//
// Build is cached: the output is rebuilt only when one of its inputs changes.
package conformance
