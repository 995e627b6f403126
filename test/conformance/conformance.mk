# Conformance OS live ISO (test/conformance). Included from the top-level Makefile.
#
# The builder hashes every input (kernel, modules, busybox, ignition, extlinux, the
# snofactory agent it builds, its own init script) and skips the rebuild when the hash
# matches build/conformance/conformance.iso.inputs, so this target is cheap to depend on.
# Debian packages: linux-image-amd64 busybox-static ignition isolinux syslinux-common
# extlinux xorriso grub-efi-amd64-bin grub-common dosfstools mtools e2fsprogs dpkg (and
# qemu-system-x86 qemu-utils ovmf to boot it).
CONFORMANCE_ISO ?= build/conformance/conformance.iso
GO ?= go

.PHONY: conformance-iso
conformance-iso:
	@mkdir -p $(dir $(CONFORMANCE_ISO))
	$(GO) run ./test/conformance/cmd/build-conformance-iso -o $(CONFORMANCE_ISO)
