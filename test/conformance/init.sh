#!/bin/sh
# init of the snofactory conformance OS (busybox ash).
#
# Live boot:  load modules, run Ignition (fetch-offline, files) on /config.ign against
#             /sysroot, report every phase over virtio-serial, then either install to
#             coreos.inst.install_dev and reboot, or report boot-complete and idle.
# Disk boot:  (snofactory.root=LABEL on the command line) mount the root, run Ignition
#             with /boot/ignition/config.ign if this is the first boot, report, idle.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1

log() { echo "conformance: $*"; }

die() {
	log "FATAL: $*"
	report "${PHASE:-init}" failed --detail "error=$*"
	# The final signal is explicit even on failure, so the host never waits for a timeout.
	report "$FINAL" failed --detail "error=$*"
	idle
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
AGENT_PORT=org.snofactory.agent.0
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	coreos.inst.install_dev=*) INSTALL_DEV=${arg#*=} ;;
	snofactory.root=LABEL=*) ROOT_LABEL=${arg#snofactory.root=LABEL=} ;;
	snofactory.agent_port=*) AGENT_PORT=${arg#*=} ;;
	esac
done
case "$INSTALL_DEV" in
/dev/*) ;;
?*) INSTALL_DEV=/dev/$INSTALL_DEV ;;
esac
MODE=live
FINAL=boot-complete
if [ -n "$ROOT_LABEL" ]; then
	MODE=disk
elif [ -n "$INSTALL_DEV" ]; then
	FINAL=install-complete
fi

# The port appears once virtio_console has probed the device.
i=0
while [ -z "$(cat /sys/class/virtio-ports/*/name 2>/dev/null)" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
report init ok --detail "mode=$MODE" --detail "kernel=$(uname -r)" --detail-file cmdline=/proc/cmdline

# wait_for PATH: block devices appear asynchronously after their modules load.
wait_for() {
	i=0
	while [ ! -e "$1" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -e "$1" ]
}

# run_ignition CONFIG ROOT: Ignition's offline stages, as CoreOS runs them in the initramfs.
run_ignition() {
	cfg=$1
	root=$2
	mkdir -p "$root/etc/selinux" /run/ignition
	# The files stage relabels through setfiles and reads the SELinux config.
	[ -f "$root/etc/selinux/config" ] || printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' >"$root/etc/selinux/config"
	for stage in fetch-offline files; do
		PHASE=ignition-$stage
		report "$PHASE" start
		if ! IGNITION_CONFIG_FILE=$cfg /bin/ignition -platform file -stage "$stage" -root "$root" \
			-log-to-stdout -config-cache /run/ignition/config.json -state-file /run/ignition/state \
			-neednet /run/ignition/neednet >/run/ignition/$stage.log 2>&1; then
			tail -n 20 /run/ignition/$stage.log
			die "ignition $stage failed"
		fi
		report "$PHASE" ok
	done
	PHASE=ignition-result
	report "$PHASE" ok --files-root "$root" --ignition-config /run/ignition/config.json
}

install_to_disk() {
	PHASE=install
	dev=$INSTALL_DEV
	report install start --detail "device=$dev"
	wait_for "$dev" || die "install device $dev not found"
	mkdir -p /run/media/iso /mnt/target
	for cd in /dev/sr0 /dev/sr1; do
		wait_for "$cd" && mount -t iso9660 -o ro "$cd" /run/media/iso 2>/dev/null && break
	done
	[ -f /run/media/iso/images/pxeboot/vmlinuz ] || die "live ISO not found"
	# One bootable partition from 1 MiB (the MBR template carries the partition table and
	# syslinux's boot code), ext2 on it, extlinux as the boot loader.
	dd if=/usr/share/conformance/mbr.img of="$dev" bs=512 count=1 conv=fsync 2>/dev/null || die "writing the MBR"
	blockdev --rereadpt "$dev" || die "re-reading the partition table of $dev"
	part=${dev}1
	case "$dev" in *[0-9]) part=${dev}p1 ;; esac
	wait_for "$part" || die "partition $part did not appear"
	mke2fs -q -L sfroot "$part" >/dev/null || die "mke2fs $part"
	mount -t ext4 "$part" /mnt/target || die "mounting $part"
	mkdir -p /mnt/target/boot/extlinux /mnt/target/boot/ignition /mnt/target/root
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
  append snofactory.root=LABEL=sfroot$kargs
CFG
	extlinux --install /mnt/target/boot/extlinux >/dev/null 2>&1 || die "extlinux --install"
	sync
	umount /mnt/target
	umount /run/media/iso
	report install ok --detail "device=$dev" --detail "partition=$part"
	report install-complete ok --detail "device=$dev"
	log "installed to $dev; rebooting"
	sync
	reboot -f
}

if [ "$MODE" = disk ]; then
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
	mount -t ext4 "$part" /mnt/disk || die "mounting $part"
	report mount-root ok --detail "device=$part"
	firstboot=false
	if [ -f /mnt/disk/boot/ignition.firstboot ]; then
		firstboot=true
		if [ -f /mnt/disk/boot/ignition/config.ign ]; then
			run_ignition /mnt/disk/boot/ignition/config.ign /mnt/disk/root
		fi
		rm -f /mnt/disk/boot/ignition.firstboot
		sync
	elif [ -f /mnt/disk/boot/ignition/config.ign ]; then
		# Later boots: show the host that what Ignition wrote on the first boot persisted.
		report persisted-files ok --files-root /mnt/disk/root --ignition-config /mnt/disk/boot/ignition/config.ign
	fi
	report boot-complete ok --detail mode=disk --detail "firstboot=$firstboot"
	idle
fi

if [ -f /config.ign ]; then
	run_ignition /config.ign /sysroot
else
	report ignition info --detail "config=none"
fi
if [ -n "$INSTALL_DEV" ]; then
	install_to_disk
	idle
fi
report boot-complete ok --detail mode=live
idle
