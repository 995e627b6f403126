// Package conformance builds the conformance OS: a minimal live ISO made from Debian
// packages (kernel, busybox, the real ignition binary, extlinux, GRUB) plus the static
// snofactory binary in agent mode, laid out like a CoreOS live ISO, that installs itself
// to disk the way the factory VM expects (see init.sh for the whole sequence).
//
// It exists so every stage can be exercised end to end on machines that have no RHCOS
// image: the ISO boots with BIOS (isolinux, also as a hybrid disk) and UEFI (GRUB), and
// has the /images/ignition.img embed area, /coreos/igninfo.json, /coreos/kargs.json
// pointing at real karg areas in isolinux/isolinux.cfg and EFI/BOOT/grub.cfg, and
// /coreos/features.json. At boot its init runs Ignition's fetch-offline and files stages
// on /config.ign and reports every phase to the host over virtio-serial. Given a target
// disk (the virtio disk with serial wire.TargetDiskSerial, or coreos.inst.install_dev)
// it imports the precache data disk's images (serial wire.PrecacheDiskSerial) into the
// target root's containers-storage, writes an MBR disk with an EFI System Partition
// (GRUB) and an ext2 root (extlinux; its UUID, hash seed and creation time from the install
// request disk, serial wire.InstallDiskSerial, so one lock installs one file system), so
// the same disk boots under UEFI and BIOS, and reboots into it; the first boot from disk runs Ignition again and the root's enabled
// units, then reports install-complete (phases: wire.InstallPhases).
//
// The installed root carries a dpkg status file (DpkgStatusPath) listing the Debian
// packages the OS takes its files from, at the build host's versions, so the node's agent
// lists them and a seed's SBOM names them.
//
// Build is cached: the output is rebuilt only when one of its inputs changes.
package conformance
