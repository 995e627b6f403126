# Conformance OS live ISO (test/conformance). Included from the top-level Makefile.
#
# The builder hashes every input (kernel, modules, busybox, ignition, extlinux, the
# snofactory agent it builds, its own init script) and skips the rebuild when the hash
# matches build/conformance/conformance.iso.inputs, so this target is cheap to depend on.
# Debian packages: linux-image-amd64 busybox-static ignition isolinux syslinux-common
# extlinux xorriso grub-efi-amd64-bin grub-common dosfstools mtools e2fsprogs gdisk dpkg (and
# qemu-system-x86 qemu-utils ovmf to boot it).
CONFORMANCE_ISO ?= build/conformance/conformance.iso
GO ?= go

.PHONY: conformance-iso
conformance-iso:
	@mkdir -p $(dir $(CONFORMANCE_ISO))
	$(GO) run ./test/conformance/cmd/build-conformance-iso -o $(CONFORMANCE_ISO)

# The systemd conformance OS (test/conformance BuildSystemd): a Debian root made with
# mmdebstrap (systemd, NetworkManager, OpenSSH, chrony; cached apart in debian.tar, keyed
# by the package list and mirror: minutes the first time), the agent, the host's kernel and
# a small initramfs, in build/conformance-systemd/. Needs root (mmdebstrap's root mode)
# and the Debian mirror ($(DEBIAN_MIRROR) if set). The same OS installable as RHCOS is
# (BuildSystemdLive: live/metal.img and live/systemd-live.iso) is built here too: the
# default site test builds the demo blueprint on it.
CONFORMANCE_SYSTEMD_DIR ?= build/conformance-systemd

.PHONY: conformance-systemd
conformance-systemd:
	@mkdir -p $(CONFORMANCE_SYSTEMD_DIR)
	$(GO) run ./test/conformance/cmd/build-conformance-systemd -o $(CONFORMANCE_SYSTEMD_DIR)
