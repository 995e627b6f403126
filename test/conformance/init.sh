#!/bin/sh
# init of the snofactory conformance OS (busybox ash).
#
# Live boot:  load modules, report live-booted, run Ignition (fetch-offline, files) on
#             /config.ign against /sysroot (ignition-applied). With a target disk
#             (coreos.inst.install_dev=DEV, else the virtio disk with serial
#             snofactory-target), install: partition and format it (the file system's
#             UUID, hash seed and time from the disk with serial snofactory-install, when
#             the host attached one), write the root's userland and package database,
#             import the precache data disk's images (serial snofactory-precache) into
#             the target root's containers-storage (images-imported), write the kernel
#             and both boot loaders (written-to-disk) and reboot. With no target disk,
#             report boot-complete and stay live.
# Disk boot:  (snofactory.root=LABEL=... on the command line) mount the root. First boot:
#             report rebooted-from-disk, run Ignition on /boot/ignition/config.ign, run the
#             root's enabled units (units), report install-complete, then take the
#             factory's commands (freeze, thaw, report, seal, poweroff). Later boots: report
#             the persisted files, run the facts hook, report boot-complete; in the factory,
#             take its commands; at a site, reconfigure first.
# Any failure reports its phase failed, then the final phase failed with the same error=
# and log= details, so the host never waits for a timeout.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1
mkdir -p /run/snofactory

TARGET_SERIAL=snofactory-target
PRECACHE_SERIAL=snofactory-precache
INSTALL_SERIAL=snofactory-install
# A live ISO that carries this whole disk image installs it (install_metal), as the
# systemd conformance OS's live ISO does (conformance.MetalImagePath).
METAL_IMAGE=images/metal.img.gz
# e2fsprogs' mke2fs and chattr, by their paths: busybox's sh runs its own applets before
# PATH's files.
MKE2FS=/bin/mke2fs.e2fsprogs
CHATTR=/bin/chattr.e2fsprogs
SGDISK=/bin/sgdisk
GPTMBR=/usr/share/conformance/gptmbr.bin
# The installed disk's layout (conformance.ESPMiB, MinDiskMiB): the ESP ends at 9 MiB, and
# the root needs the rest up to 201 MiB.
ESP_END_MIB=9
MIN_ROOT_END_MIB=201
# nodelalloc: blocks are allocated as each file is written, in the installer's order, not
# when the kernel's writeback gets to them, so one lock's installs lay files out alike.
ROOT_MOUNT_OPTIONS=nodelalloc
ROOT_LABEL_DEFAULT=sfroot

log() { echo "conformance: $*"; }

# die MESSAGE [LOGFILE]: report the current phase and the final phase failed, then idle.
die() {
	log "FATAL: $1"
	[ -n "$2" ] && tail -n 40 "$2"
	set -- "$1" "${2:-/dev/null}"
	send_bundle
	report "${PHASE:-init}" failed --detail "error=$1" --log "$2"
	report "$FINAL" failed --detail "error=$1" --log "$2"
	idle
}

# send_bundle writes the install's logs (/run/snofactory, the root's unit logs) as a gzipped
# tar to the gather port, as an OpenShift node sends what installer-gather.sh collects.
send_bundle() {
	for f in /sys/class/virtio-ports/*/name; do
		[ "$(cat "$f" 2>/dev/null)" = "$GATHER_PORT" ] || continue
		d=${f%/name}
		set -- /run/snofactory
		[ -n "$root" ] && [ -d "$root/var/log/snofactory" ] && set -- "$@" "$root/var/log/snofactory"
		tar -czf "/dev/${d##*/}" "$@" 2>/dev/null || log "could not send the log bundle"
		return
	done
}

idle() {
	while :; do sleep 3600; done
}

report() {
	p=$1
	s=$2
	shift 2
	/bin/snofactory agent report --port "$AGENT_PORT" --phase "$p" --status "$s" "$@" >/dev/null ||
		log "could not report $p $s"
}

for m in $(cat /etc/modules.load); do
	insmod "$m" 2>/dev/null || log "insmod $m failed"
done

# Kernel command line.
INSTALL_DEV=
ROOT_LABEL=
LOADER=
AGENT_PORT=org.snofactory.agent.0
GATHER_PORT=org.snofactory.gather.0
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	coreos.inst.install_dev=*) INSTALL_DEV=${arg#*=} ;;
	snofactory.root=LABEL=*) ROOT_LABEL=${arg#snofactory.root=LABEL=} ;;
	snofactory.loader=*) LOADER=${arg#*=} ;;
	snofactory.agent_port=*) AGENT_PORT=${arg#*=} ;;
	esac
done
case "$INSTALL_DEV" in
/dev/*) ;;
?*) INSTALL_DEV=/dev/$INSTALL_DEV ;;
esac
FIRMWARE=bios
[ -d /sys/firmware/efi ] && FIRMWARE=uefi

# disk_by_serial SERIAL: the virtio-blk disk the host gave that serial (no udev here, so
# no /dev/disk/by-id: the kernel shows the serial in sysfs).
disk_by_serial() {
	for b in /sys/block/*; do
		if [ "$(cat "$b/serial" 2>/dev/null)" = "$1" ]; then
			echo "/dev/${b##*/}"
			return 0
		fi
	done
	return 1
}

MODE=live
FINAL=boot-complete
if [ -n "$ROOT_LABEL" ]; then
	MODE=disk
else
	# The karg wins; else the disk the host marked as the target.
	[ -n "$INSTALL_DEV" ] || INSTALL_DEV=$(disk_by_serial "$TARGET_SERIAL")
	[ -n "$INSTALL_DEV" ] && FINAL=install-complete
fi

# The port appears once virtio_console has probed the device.
i=0
while [ -z "$(cat /sys/class/virtio-ports/*/name 2>/dev/null)" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done

# wait_for PATH: block devices appear asynchronously after their modules load.
wait_for() {
	i=0
	while [ ! -e "$1" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -e "$1" ]
}

# partition DEV N: the Nth partition's device node.
partition() {
	case "$1" in
	*[0-9]) echo "${1}p$2" ;;
	*) echo "$1$2" ;;
	esac
}

# run_ignition CONFIG ROOT RESULT-PHASE: Ignition's offline stages, as CoreOS runs them in
# the initramfs; the per-stage reports are detail, RESULT-PHASE says it all ran.
run_ignition() {
	cfg=$1
	root=$2
	PHASE=$3
	mkdir -p "$root/etc/selinux" /run/ignition
	# The files stage relabels through setfiles and reads the SELinux config.
	[ -f "$root/etc/selinux/config" ] || printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' >"$root/etc/selinux/config"
	for stage in fetch-offline files; do
		report "ignition-$stage" start
		if ! IGNITION_CONFIG_FILE=$cfg /bin/ignition -platform file -stage "$stage" -root "$root" \
			-log-to-stdout -config-cache /run/ignition/config.json -state-file /run/ignition/state \
			-neednet /run/ignition/neednet >/run/ignition/$stage.log 2>&1; then
			die "ignition $stage failed" /run/ignition/$stage.log
		fi
		report "ignition-$stage" ok
	done
	report "$PHASE" ok --files-root "$root" --ignition-config /run/ignition/config.json
}

# prepare_target DEV: the partition table, the ESP and an empty root file system,
# mounted on /mnt/target. An installed disk is refused: a live boot that finds one means
# the firmware booted the ISO again after an install, and installing again would loop.
prepare_target() {
	dev=$1
	wait_for "$dev" || die "install device $dev not found"
	if [ "$(dd if="$dev" bs=1 skip=440 count=4 2>/dev/null)" = SNOF ]; then
		die "$dev already holds an installed system: the firmware booted the live ISO again after the install (boot order must prefer the target disk)"
	fi
	req=$(disk_by_serial "$INSTALL_SERIAL")
	CS_NUMBER=
	[ -n "$req" ] && container_storage_request "$req"
	if [ -n "$CS_NUMBER" ]; then
		partition_gpt "$dev"
	else
		dd if=/usr/share/conformance/mbr.img of="$dev" bs=512 count=1 conv=fsync 2>/dev/null || die "writing the MBR of $dev"
		grow_root "$dev"
	fi
	blockdev --rereadpt "$dev" || die "re-reading the partition table of $dev"
	ESP=$(partition "$dev" 1)
	ROOTPART=$(partition "$dev" 2)
	wait_for "$ESP" && wait_for "$ROOTPART" || die "partitions of $dev did not appear"
	dd if=/usr/share/conformance/esp.img of="$ESP" bs=1M conv=fsync 2>/dev/null || die "writing the ESP $ESP"
	mkfs_root "$ROOTPART" "$req"
	mkdir -p /mnt/target
	mount -t ext4 -o "$ROOT_MOUNT_OPTIONS" "$ROOTPART" /mnt/target || die "mounting $ROOTPART"
	mkdir -p /mnt/target/boot/extlinux /mnt/target/boot/grub /mnt/target/boot/ignition /mnt/target/root/var/tmp
	[ -n "$CS_NUMBER" ] && container_storage_target "$dev" /mnt/target/root
}

# ---- partition_gpt ----
# container_storage_request REQUEST: CS_NUMBER, CS_LABEL and CS_START_MIB from the install
# request (a blueprint's spec.disk.containerStorage); all empty without one. GPT_IDS and
# CS_MKFS_IDS are the GUIDs and file system identity the request fixes (sgdisk and mke2fs
# arguments; empty: the tools pick them), CS_MKFS_TIME its mkfs time.
container_storage_request() {
	CS_NUMBER=
	CS_LABEL=
	CS_START_MIB=
	GPT_IDS=
	CS_MKFS_IDS=
	CS_MKFS_TIME=
	cs_guid=
	while IFS='=' read -r k v; do
		case "$k" in
		cs_number) CS_NUMBER=$v ;;
		cs_label) CS_LABEL=$v ;;
		cs_start_mib) CS_START_MIB=$v ;;
		gpt_disk_guid) GPT_IDS="$GPT_IDS -U $v" ;;
		gpt_esp_guid) GPT_IDS="$GPT_IDS -u 1:$v" ;;
		gpt_root_guid) GPT_IDS="$GPT_IDS -u 2:$v" ;;
		cs_guid) cs_guid=$v ;;
		cs_uuid) CS_MKFS_IDS="$CS_MKFS_IDS -U $v" ;;
		cs_hash_seed) CS_MKFS_IDS="$CS_MKFS_IDS -E hash_seed=$v" ;;
		mkfs_time) CS_MKFS_TIME=$v ;;
		esac
	done <<REQ
$(tr -d '\000' <"$1")
REQ
	[ -n "$cs_guid" ] && GPT_IDS="$GPT_IDS -u $CS_NUMBER:$cs_guid"
}

# partition_gpt DEV: a GPT instead of the MBR, for a separate /var/lib/containers as RHCOS
# has it: 1 the ESP and 2 the root at the MBR layout's offsets, the root up to CS_START_MIB,
# and CS_NUMBER named CS_LABEL from there to the disk's end. BIOS boots it through
# syslinux's gptmbr.bin in the protective MBR, which starts the partition marked legacy
# BIOS bootable (attribute 2, the root, where extlinux sits); UEFI finds the ESP by its type.
partition_gpt() {
	[ "$CS_START_MIB" -ge "$MIN_ROOT_END_MIB" ] 2>/dev/null ||
		die "the container-storage partition starts at $CS_START_MIB MiB, inside the ESP and the root (they end at $MIN_ROOT_END_MIB MiB): give the VM a bigger disk, or a later start"
	"$SGDISK" --zap-all "$1" >/run/snofactory/sgdisk.log 2>&1
	if ! "$SGDISK" -n "1:2048:$((ESP_END_MIB * 2048 - 1))" -t 1:EF00 -c 1:EFI-SYSTEM \
		-n "2:$((ESP_END_MIB * 2048)):$((CS_START_MIB * 2048 - 1))" -t 2:8300 -c "2:$ROOT_LABEL_DEFAULT" -A 2:set:2 \
		-n "$CS_NUMBER:$((CS_START_MIB * 2048)):0" -t "$CS_NUMBER:8300" -c "$CS_NUMBER:$CS_LABEL" $GPT_IDS \
		"$1" >>/run/snofactory/sgdisk.log 2>&1; then
		die "partitioning $1 (GPT) failed" /run/snofactory/sgdisk.log
	fi
	TABLE=gpt
	dd if="$GPTMBR" of="$1" bs=440 count=1 conv=notrunc,fsync 2>/dev/null || die "writing the GPT boot code of $1"
	printf SNOF | dd of="$1" bs=1 seek=440 count=4 conv=notrunc,fsync 2>/dev/null || die "marking $1 installed"
}

# container_storage_target DEV ROOT: an ext4 file system on the container-storage partition,
# mounted at ROOT/var/lib/containers for the image import, and the mount unit RHCOS's
# Ignition writes for it (Butane with_mount_unit), which a boot from disk and the site's
# grow step read.
container_storage_target() {
	CSPART=$(partition "$1" "$CS_NUMBER")
	wait_for "$CSPART" || die "the container-storage partition $CSPART did not appear"
	# An empty E2FSPROGS_FAKE_TIME would mean 1970, so it is only set with a time.
	if ! (
		[ -z "$CS_MKFS_TIME" ] || export E2FSPROGS_FAKE_TIME="$CS_MKFS_TIME"
		"$MKE2FS" -F -q -t ext4 -L "$CS_LABEL" $CS_MKFS_IDS "$CSPART" >/run/snofactory/mkfs-cs.log 2>&1
	); then
		die "mke2fs $CSPART failed" /run/snofactory/mkfs-cs.log
	fi
	mkdir -p "$2/var/lib/containers" "$2/etc/systemd/system/local-fs.target.requires"
	mount -t ext4 "$CSPART" "$2/var/lib/containers" || die "mounting $CSPART"
	esc=$(echo "$CS_LABEL" | sed 's/-/\\x2d/g')
	cat >"$2/etc/systemd/system/var-lib-containers.mount" <<UNIT
[Unit]
Requires=systemd-fsck@dev-disk-by\x2dpartlabel-$esc.service
After=systemd-fsck@dev-disk-by\x2dpartlabel-$esc.service

[Mount]
Where=/var/lib/containers
What=/dev/disk/by-partlabel/$CS_LABEL
Type=ext4

[Install]
RequiredBy=local-fs.target
UNIT
	ln -sf ../var-lib-containers.mount "$2/etc/systemd/system/local-fs.target.requires/var-lib-containers.mount"
}
# ---- end of partition_gpt ----

# ---- mkfs_root ----
# mkfs_root PART [REQUEST]: the root's empty ext2 file system, labelled $ROOT_LABEL_DEFAULT.
# REQUEST (the install stage's request disk: key=value lines, NUL-padded) fixes its UUID,
# directory hash seed (which also places top-level directories) and creation time, so two
# installs from one lock make the same file system; without one, mke2fs picks them.
mkfs_root() {
	uuid=
	seed=
	mtime=
	if [ -n "$2" ]; then
		while IFS='=' read -r k v; do
			case "$k" in
			root_uuid) uuid=$v ;;
			hash_seed) seed=$v ;;
			mkfs_time) mtime=$v ;;
			esac
		done <<REQ
$(tr -d '\000' <"$2")
REQ
		[ -n "$uuid" ] && [ -n "$seed" ] || die "the install request on $2 names no root_uuid and hash_seed"
		set -- "$1" -U "$uuid" -E "hash_seed=$seed"
	else
		log "no install request disk (serial $INSTALL_SERIAL): mke2fs picks the root's UUID and hash seed"
		set -- "$1"
	fi
	fsdev=$1
	shift
	# mke2fs's built-in defaults (this OS has no mke2fs.conf) with the layout pinned. An
	# empty E2FSPROGS_FAKE_TIME would mean 1970, so it is only set with a time.
	if ! (
		[ -z "$mtime" ] || export E2FSPROGS_FAKE_TIME="$mtime"
		"$MKE2FS" -F -q -t ext2 -b 4096 -I 256 -L "$ROOT_LABEL_DEFAULT" "$@" "$fsdev"
	); then
		die "mke2fs $fsdev failed (its message is on the console above)"
	fi
}
# ---- end of mkfs_root ----

# grow_root DEV: the root partition, the MBR's second entry, takes the rest of the disk, as
# CoreOS grows its root on first boot: the template's size is only the minimum.
grow_root() {
	start=$(od -An -tu4 -j470 -N4 /usr/share/conformance/mbr.img | tr -d ' ')
	disk=$(cat "/sys/block/${1#/dev/}/size")
	size=$((disk - start))
	[ "$size" -gt 4294967295 ] && size=4294967295
	[ "$size" -gt 0 ] || die "$1 is too small for the root partition"
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((size & 255)) $((size >> 8 & 255)) $((size >> 16 & 255)) $((size >> 24 & 255)))" |
		dd of="$1" bs=1 seek=474 count=4 conv=notrunc,fsync 2>/dev/null || die "growing the root partition of $1"
}

# import_images ROOT: the precache data disk's images into ROOT's containers-storage.
import_images() {
	PHASE=images-imported
	root=$1
	pdev=$(disk_by_serial "$PRECACHE_SERIAL")
	if [ -z "$pdev" ]; then
		report "$PHASE" ok --detail images=0 --detail "reason=no precache data disk (no virtio disk with serial $PRECACHE_SERIAL)"
		return
	fi
	report "$PHASE" start --detail "device=$pdev"
	# containers/image stages big files in /var/tmp, which this initramfs lacks: use the
	# target's own, on disk rather than in RAM.
	mkdir -p /var && ln -sfn "$root/var/tmp" /var/tmp
	if ! /bin/snofactory agent import-images --disk "$pdev" --driver vfs \
		--graph-root "$root/var/lib/containers/storage" --run-root /run/containers/storage \
		--scratch-dir "$root/var/tmp" >/run/snofactory/import.json 2>/run/snofactory/import.log; then
		die "importing the images of $pdev failed" /run/snofactory/import.log
	fi
	rel=${root#/mnt/target}
	report "$PHASE" ok --detail "images=$(grep -c '"ref":' /run/snofactory/import.json)" --detail "device=$pdev" \
		--detail "storage=${rel#/root}/var/lib/containers/storage" --detail driver=vfs
}

# write_os DEV: the rest of the installed OS on the mounted target: the live kernel and
# initramfs, the config for the first boot, and both boot loaders' menus.
write_os() {
	PHASE=written-to-disk
	dev=$1
	mount_iso
	cp /run/media/iso/images/pxeboot/vmlinuz /run/media/iso/images/pxeboot/initrd.img /mnt/target/boot/ || die "copying the kernel"
	# Like coreos-installer -i: the first boot from disk runs Ignition on this config.
	[ -f /config.ign ] && cp /config.ign /mnt/target/boot/ignition/config.ign
	touch /mnt/target/boot/ignition.firstboot
	kargs=
	for arg in $(cat /proc/cmdline); do
		case "$arg" in
		coreos.inst.* | initrd=* | BOOT_IMAGE=* | ignition.firstboot) ;;
		*) kargs="$kargs $arg" ;;
		esac
	done
	cat >/mnt/target/boot/extlinux/extlinux.conf <<CFG
serial 0 115200
default disk
prompt 0
timeout 0
label disk
  kernel /boot/vmlinuz
  initrd /boot/initrd.img
  append snofactory.root=LABEL=$ROOT_LABEL_DEFAULT snofactory.loader=extlinux$kargs
CFG
	cat >/mnt/target/boot/grub/grub.cfg <<CFG
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry 'snofactory conformance OS' {
  linux /boot/vmlinuz snofactory.root=LABEL=$ROOT_LABEL_DEFAULT snofactory.loader=grub-efi$kargs
  initrd /boot/initrd.img
}
CFG
	extlinux --install /mnt/target/boot/extlinux >/run/snofactory/extlinux.log 2>&1 || die "extlinux --install" /run/snofactory/extlinux.log
	sync
	[ -n "$CSPART" ] && { umount /mnt/target/root/var/lib/containers || die "unmounting $CSPART"; }
	umount /mnt/target
	umount /run/media/iso
	report "$PHASE" ok --detail "device=$dev" --detail "root=$ROOTPART" --detail "esp=$ESP" --detail "table=${TABLE:-mbr}" \
		--detail "loaders=extlinux(bios),grub(uefi)" --detail "firmware=$FIRMWARE"
}

# write_root ROOT: the installed root's userland (busybox, the agent) so the units' commands
# and scripts find /bin/sh, and its package database. Before the image import, which frees
# inodes (its temporary files) that the kernel reuses or not depending on how recently they
# were freed: what comes after them could get other inode numbers from one install to the
# next.
write_root() {
	root=$1
	mkdir -p "$root/usr/bin" "$root/usr/local/bin" "$root/etc" "$root/var/log"
	cp /bin/busybox "$root/usr/bin/busybox" || die "copying busybox"
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -sf busybox "$root/usr/bin/$a"
	done
	ln -s usr/bin "$root/bin" && ln -s usr/bin "$root/sbin" && ln -s bin "$root/usr/sbin" || die "linking the root's bin directories"
	cp /bin/snofactory "$root/usr/local/bin/snofactory" || die "copying the agent"
	cp /etc/os-release "$root/etc/os-release"
	# The Debian packages this OS is made of, for the node's package listing and the SBOM.
	mkdir -p "$root/var/lib/dpkg" && cp /usr/share/conformance/dpkg-status "$root/var/lib/dpkg/status" ||
		die "writing the package database"
	# /var/lib as a top of directory hierarchy: ext4 gives each directory made in it from now
	# on (the image import's containers storage) a block group of its own, found from the
	# hash seed, so the import's temporary files, whose number varies with timing, do not
	# shift the inode numbers of what the first boot writes beside the OS.
	"$CHATTR" +T "$root/var/lib" || die "marking /var/lib a top of directory hierarchy"
}

# ---- install_metal ----
# install_metal DEV IMAGE CONFIG MNT: an OS that comes as a whole disk image (the systemd
# conformance OS), as `coreos-installer install` writes the metal image (src/install.rs):
# the image's bytes from sector 0, then the Ignition config into the boot file system
# (ignition/config.ign) beside the `ignition.firstboot` stamp that makes the next boot a
# first boot. The image's root is its partition 2 (mounted on MNT), /boot in it. An
# installed disk is refused, as in prepare_target.
install_metal() {
	dev=$1
	wait_for "$dev" || die "install device $dev not found"
	if [ "$(dd if="$dev" bs=1 skip=440 count=4 2>/dev/null)" = SNOF ]; then
		die "$dev already holds an installed system: the firmware booted the live ISO again after the install (boot order must prefer the target disk)"
	fi
	zcat "$2" | dd of="$dev" bs=1M conv=notrunc,fsync 2>/run/snofactory/metal.log || die "writing the disk image to $dev" /run/snofactory/metal.log
	[ "$(dd if="$dev" bs=1 skip=440 count=4 2>/dev/null)" = SNOF ] || die "the disk image written to $dev carries no installed-disk mark"
	blockdev --rereadpt "$dev" || die "re-reading the partition table of $dev"
	ROOTPART=$(partition "$dev" 2)
	wait_for "$ROOTPART" || die "the root partition of $dev did not appear"
	mkdir -p "$4"
	mount -t ext4 "$ROOTPART" "$4" || die "mounting $ROOTPART"
	mkdir -p "$4/boot/ignition"
	[ -f "$3" ] && { cp "$3" "$4/boot/ignition/config.ign" || die "writing the Ignition config"; }
	touch "$4/boot/ignition.firstboot"
	sync
	umount "$4" || die "unmounting $ROOTPART"
}
# ---- end of install_metal ----

# mount_iso mounts the live ISO on /run/media/iso (once).
mount_iso() {
	[ -f /run/media/iso/images/pxeboot/vmlinuz ] && return 0
	mkdir -p /run/media/iso
	for cd in /dev/sr0 /dev/sr1; do
		wait_for "$cd" && mount -t iso9660 -o ro "$cd" /run/media/iso 2>/dev/null && break
	done
	[ -f /run/media/iso/images/pxeboot/vmlinuz ] || die "live ISO not found"
}

install_to_disk() {
	dev=$INSTALL_DEV
	PHASE=written-to-disk
	mount_iso
	if [ -f "/run/media/iso/$METAL_IMAGE" ]; then
		install_metal "$dev" "/run/media/iso/$METAL_IMAGE" /config.ign /mnt/target
		# The image's root is sized to its content; it takes the rest of the disk, as CoreOS
		# grows its root on the first boot (and as grow_root does for the MBR install).
		grow_root "$dev"
		blockdev --rereadpt "$dev" || die "re-reading the partition table of $dev"
		wait_for "$ROOTPART" || die "the root partition of $dev did not appear"
		/bin/resize2fs -f "$ROOTPART" >/run/snofactory/resize2fs.log 2>&1 ||
			die "growing the root file system on $ROOTPART" /run/snofactory/resize2fs.log
		# The precache data disk's images into the image's containers-storage, as the MBR
		# and GPT installs do, so the install reports its images-imported phase.
		mount -t ext4 "$ROOTPART" /mnt/target || die "mounting $ROOTPART"
		import_images /mnt/target
		PHASE=written-to-disk
		sync
		umount /mnt/target || die "unmounting $ROOTPART"
		umount /run/media/iso
		report "$PHASE" ok --detail "device=$dev" --detail "image=$METAL_IMAGE" --detail "firmware=$FIRMWARE"
		log "installed $METAL_IMAGE to $dev; rebooting"
		reboot -f
	fi
	prepare_target "$dev"
	write_root /mnt/target/root
	import_images /mnt/target/root
	write_os "$dev"
	log "installed to $dev; rebooting"
	sync
	reboot -f
}

# run_units ROOT: the root's enabled units, chrooted into it (the installer gave it a
# busybox userland) with the live /proc, /sys, /dev and /run, so a unit can report to
# the host with the agent too.
run_units() {
	PHASE=units
	root=$1
	for d in proc sys dev run; do
		mkdir -p "$root/$d"
		mount --bind "/$d" "$root/$d" || die "mounting /$d into $root"
	done
	mkdir -p "$root/tmp" && mount -t tmpfs tmpfs "$root/tmp"
	report "$PHASE" start
	if ! /bin/snofactory agent run-units --root "$root" --log-dir "$root/var/log/snofactory/units" \
		--failure-log /run/snofactory/unit-failure.log >/run/snofactory/units.out 2>/run/snofactory/units.err; then
		cat /run/snofactory/units.out /run/snofactory/units.err
		err=$(grep -v '^$' /run/snofactory/units.err | tail -n 1)
		[ -f /run/snofactory/unit-failure.log ] || cp /run/snofactory/units.err /run/snofactory/unit-failure.log
		die "${err:-run-units failed}" /run/snofactory/unit-failure.log
	fi
	cat /run/snofactory/units.out
	report "$PHASE" ok --detail "units=$(awk '{printf "%s%s:%s", (NR > 1 ? "," : ""), $1, $2}' /run/snofactory/units.out)" \
		--detail "logs=/var/log/snofactory/units"
}

# facts_hook: what a later boot tells the host about the installed node.
facts_hook() {
	# ---- facts hook: every non-first boot from disk, before boot-complete ----
	if /bin/snofactory agent facts --help >/dev/null 2>&1; then
		/bin/snofactory agent facts --port "$AGENT_PORT" --root /mnt/disk/root --boot-dir /mnt/disk/boot \
			--ignition-config /mnt/disk/boot/ignition/config.ign \
			--storage /mnt/disk/root/var/lib/containers/storage --driver vfs || log "agent facts failed"
	fi
	# ---- end of facts hook ----
}

disk_boot() {
	PHASE=mount-root
	part=$(findfs "LABEL=$ROOT_LABEL" 2>/dev/null)
	i=0
	while [ -z "$part" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
		part=$(findfs "LABEL=$ROOT_LABEL" 2>/dev/null)
	done
	[ -n "$part" ] || die "root LABEL=$ROOT_LABEL not found"
	mkdir -p /mnt/disk
	mount -t ext4 -o "$ROOT_MOUNT_OPTIONS" "$part" /mnt/disk || die "mounting $part"
	mount_container_storage /mnt/disk/root
	disk=/dev/$(basename "$(dirname "$(readlink -f "/sys/class/block/${part#/dev/}")")")
	serial=$(cat "/sys/block/${disk#/dev/}/serial" 2>/dev/null)
	if [ ! -f /mnt/disk/boot/ignition.firstboot ]; then
		if sealdev=$(disk_by_serial snofactory-seal); then
			seal "$sealdev"
		fi
		if [ -f /mnt/disk/root/etc/snofactory/sealed.json ]; then
			# A seed at its site: reconfigure on its first boot there; it takes no factory
			# commands.
			[ -f /mnt/disk/root/var/lib/snofactory/reconfigured ] || reconfigure_seed
			report_booted
			idle
		fi
		report_booted --detail commands=1
		factory_commands
	fi
	FINAL=install-complete
	# The proof this is the disk, not the ISO: the ISO's loaders pass no snofactory.root,
	# and the root is a partition of the disk the host gave the target serial.
	report rebooted-from-disk ok --detail "root=$part" --detail "disk=$disk" --detail "disk_serial=$serial" \
		--detail "loader=$LOADER" --detail "firmware=$FIRMWARE" --detail "kernel=$(uname -r)" --detail-file cmdline=/proc/cmdline
	if [ -f /mnt/disk/boot/ignition/config.ign ]; then
		run_ignition /mnt/disk/boot/ignition/config.ign /mnt/disk/root ignition-firstboot
	fi
	rm -f /mnt/disk/boot/ignition.firstboot
	sync
	run_units /mnt/disk/root
	sync
	# The install is over: the node stays up and asks the host what to do next (freeze
	# for the host's snapshot of the installed disk, then validation and the seal), so
	# the build boots the installed disk once.
	report install-complete ok --detail mode=disk --detail firstboot=true --detail "root=$part" --detail "firmware=$FIRMWARE" \
		--detail commands=1
	factory_commands
}

# report_booted [DETAIL...]: what a boot from disk tells the host once the node is up: the
# root, the files the first boot's Ignition wrote (persisted), the facts, boot-complete.
report_booted() {
	PHASE=mount-root
	FINAL=boot-complete
	report mount-root ok --detail "device=$part" --detail "kernel=$(uname -r)" --detail-file cmdline=/proc/cmdline
	if [ -f /mnt/disk/boot/ignition/config.ign ]; then
		# Show the host that what Ignition wrote on the first boot persisted.
		report persisted-files ok --files-root /mnt/disk/root --ignition-config /mnt/disk/boot/ignition/config.ign
	fi
	facts_hook
	report boot-complete ok --detail mode=disk --detail firstboot=false --detail "root=$part" --detail "firmware=$FIRMWARE" "$@"
}

# factory_commands: between the factory's stages the node asks the host for its next
# command (agent await) and does it: freeze and thaw the root around the host's snapshot
# of the installed disk, report as a booted node, seal, power off. Each ask says how the
# previous command went.
factory_commands() {
	last=
	err=
	while :; do
		set -- --port "$AGENT_PORT" --seal-request /run/snofactory/seal-request.json
		[ -n "$last" ] && set -- "$@" --detail "last=$last"
		[ -n "$err" ] && set -- "$@" --detail "error=$err"
		if ! cmd=$(/bin/snofactory agent await "$@" 2>/run/snofactory/await.err); then
			log "no command from the factory host: $(tail -n 1 /run/snofactory/await.err)"
			idle
		fi
		err=
		case "$cmd" in
		freeze | thaw)
			flag=--freeze
			[ "$cmd" = thaw ] && flag=--unfreeze
			sync
			if fsfreeze "$flag" /mnt/disk 2>/run/snofactory/cmd.err && { [ -z "$CSMOUNT" ] || fsfreeze "$flag" "$CSMOUNT" 2>>/run/snofactory/cmd.err; }; then
				last=$cmd:ok
			else
				last=$cmd:failed
				err=$(tail -n 1 /run/snofactory/cmd.err)
			fi
			;;
		report)
			report_booted --detail commands=1
			last=report:ok
			;;
		seal) seal /run/snofactory/seal-request.json ;;
		poweroff) clean_poweroff ;;
		*)
			last=$cmd:failed
			err="unknown command"
			;;
		esac
	done
}

# clean_poweroff ends a boot as a shutdown does: services the units left running end
# first, then their bind mounts; a root that stays busy is remounted read-only.
clean_poweroff() {
	kill -TERM -1 2>/dev/null
	sleep 0.2
	kill -KILL -1 2>/dev/null
	for d in tmp run dev sys proc; do
		umount -l "/mnt/disk/root/$d" 2>/dev/null
	done
	sync
	[ -n "$CSMOUNT" ] && { umount "$CSMOUNT" 2>/dev/null || mount -o remount,ro "$CSMOUNT"; }
	umount /mnt/disk 2>/dev/null || mount -o remount,ro /mnt/disk
	sync
	poweroff -f
}

# mount_container_storage ROOT: the container-storage partition its mount unit names
# (What=/dev/disk/by-partlabel/LABEL), found by its GPT name in sysfs (no udev here to make
# the by-partlabel link), at ROOT/var/lib/containers; nothing without the unit.
mount_container_storage() {
	CSMOUNT=
	unit=$1/etc/systemd/system/var-lib-containers.mount
	[ -f "$unit" ] || return 0
	label=$(sed -n 's|^What=/dev/disk/by-partlabel/||p' "$unit")
	cs=
	for u in /sys/class/block/*/uevent; do
		grep -qx "PARTNAME=$label" "$u" 2>/dev/null || continue
		cs=/dev/$(sed -n 's/^DEVNAME=//p' "$u")
		break
	done
	[ -n "$cs" ] || die "no partition named $label for /var/lib/containers ($unit)"
	mount -t ext4 "$cs" "$1/var/lib/containers" || die "mounting $cs on /var/lib/containers"
	CSMOUNT=$1/var/lib/containers
}

# disk_by_serial SERIAL prints the block device with that virtio serial.
disk_by_serial() {
	for f in /sys/block/*/serial; do
		[ "$(cat "$f" 2>/dev/null)" = "$1" ] || continue
		f=${f%/serial}
		echo "/dev/${f##*/}"
		return 0
	done
	return 1
}

# reconfigure_seed: a sealed seed's first boot at the site. The agent waits for the
# site-config medium (it says so on the console), applies it and reports each step. On
# failure nothing is marked done: the seed stays sealed, to be booted again with a good
# medium. On success the site's service answers on the new address.
reconfigure_seed() {
	PHASE=reconfigured
	FINAL=reconfigured
	ip link set lo up
	# The agent reads the node's disks under its --root, as on a node whose / it is: the
	# container-storage step finds the partition in sysfs and grows it through /dev.
	for d in sys dev; do
		mkdir -p "/mnt/disk/root/$d"
		mount --bind "/$d" "/mnt/disk/root/$d" || die "mounting /$d into the root"
	done
	if ! /bin/snofactory agent reconfigure --root /mnt/disk/root --port "$AGENT_PORT" --resolv-conf /etc/resolv.conf; then
		log "the site reconfiguration failed (see above): fix the site-config medium and boot again"
		idle
	fi
	mkdir -p /run/www
	{ echo "hostname=$(hostname)"; ip -o -4 addr show | awk '{print "address=" $2 " " $4}'; sed -n 's/^nameserver /dns=/p' /etc/resolv.conf; } >/run/www/site.txt
	httpd -p 8080 -h /run/www || log "httpd failed"
}

# seal: the seal stage attached its request disk. The agent prepares the root for
# relocation and reports; the freed blocks are discarded so the seed compresses well.
seal() {
	PHASE=sealed
	FINAL=sealed
	/bin/snofactory agent seal --root /mnt/disk/root --boot-dir /mnt/disk/boot --request "$1" --port "$AGENT_PORT" || idle
	fstrim /mnt/disk 2>/dev/null || log "fstrim /mnt/disk: no discard support"
	[ -n "$CSMOUNT" ] && { fstrim "$CSMOUNT" 2>/dev/null || log "fstrim $CSMOUNT: no discard support"; }
	clean_poweroff
}

if [ "$MODE" = disk ]; then
	disk_boot
fi

PHASE=live-booted
report live-booted ok --detail mode=live --detail "install_dev=${INSTALL_DEV:-none}" --detail "firmware=$FIRMWARE" \
	--detail "kernel=$(uname -r)" --detail-file cmdline=/proc/cmdline
if [ -f /config.ign ]; then
	run_ignition /config.ign /sysroot ignition-applied
else
	report ignition-applied ok --detail "config=none"
fi
if [ -n "$INSTALL_DEV" ]; then
	install_to_disk
	idle
fi
report boot-complete ok --detail mode=live
idle
