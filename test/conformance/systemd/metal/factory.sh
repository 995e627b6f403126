#!/bin/sh
# The factory side of the systemd OS installed from its metal image, the same protocol the
# busybox conformance OS's init serves (init.sh disk_boot), run by systemd units:
#   factory.sh firstboot  (snofactory-factory-firstboot.service, before sysinit.target, only
#                          while /boot/ignition.firstboot exists): report rebooted-from-disk,
#                          run Ignition's offline stages on /boot/ignition/config.ign against
#                          / (RHCOS runs them in its initramfs: ignition-fetch-offline and
#                          ignition-files units of dracut's 30ignition), remove the stamp.
#   factory.sh commands   (snofactory-factory.service, after the default target): on the
#                          first boot report install-complete; on a later one seal when the
#                          seal stage attached its request disk, else report as a booted
#                          node; then take the factory's commands (freeze, thaw, report,
#                          seal, poweroff). A sealed root (a seed at its site) takes none:
#                          it reports boot-complete (ready.sh) once its site is applied.
# Any failure reports its phase failed and the final phase failed with error= and log=.
set -u
PORT=org.snofactory.agent.0
AGENT=/usr/local/bin/snofactory
IGN=/usr/lib/snofactory/ignition
RUN=/run/snofactory
mkdir -p "$RUN"

report() {
	p=$1
	s=$2
	shift 2
	"$AGENT" agent report --port "$PORT" --phase "$p" --status "$s" "$@" >/dev/null || echo "factory: could not report $p $s" >&2
}

# die PHASE FINAL MESSAGE [LOG]: as init.sh's die: the phase and the final phase failed.
die() {
	echo "factory: FATAL: $3" >&2
	report "$1" failed --detail "error=$3" --log "${4:-/dev/null}"
	report "$2" failed --detail "error=$3" --log "${4:-/dev/null}"
	exit 1
}

# wait_port: udev may not have probed virtio_console yet this early in the boot.
wait_port() {
	i=0
	while ! grep -qx "$PORT" /sys/class/virtio-ports/*/name 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

rootdev() { findmnt -n -o SOURCE /; }

firstboot() {
	wait_port
	part=$(rootdev)
	disk=/dev/$(lsblk -n -o PKNAME "$part" | head -n 1)
	report rebooted-from-disk ok --detail "root=$part" --detail "disk=$disk" \
		--detail "disk_serial=$(cat "/sys/block/${disk#/dev/}/serial" 2>/dev/null)" --detail loader=extlinux \
		--detail "kernel=$(uname -r)" --detail-file cmdline=/proc/cmdline --detail init=systemd
	cfg=/boot/ignition/config.ign
	if [ -f "$cfg" ]; then
		mkdir -p /run/ignition
		# The files stage relabels through setfiles and reads the SELinux config (init.sh
		# run_ignition); this OS has no SELinux.
		[ -f /etc/selinux/config ] || { mkdir -p /etc/selinux && printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' >/etc/selinux/config; }
		for stage in fetch-offline files; do
			report "ignition-$stage" start
			if ! PATH=$IGN:$PATH IGNITION_CONFIG_FILE=$cfg "$IGN/ignition" -platform file -stage "$stage" -root / \
				-log-to-stdout -config-cache /run/ignition/config.json -state-file /run/ignition/state \
				-neednet /run/ignition/neednet >"/run/ignition/$stage.log" 2>&1; then
				die ignition-firstboot install-complete "ignition $stage failed" "/run/ignition/$stage.log"
			fi
			report "ignition-$stage" ok
		done
		report ignition-firstboot ok --files-root / --ignition-config /run/ignition/config.json
	fi
	rm -f /boot/ignition.firstboot
	touch "$RUN/factory-firstboot"
	sync
	# Ignition ran after systemd loaded its units (in RHCOS it runs before the switch to the
	# real root): load what it wrote and pull its enabled units into this boot.
	systemctl daemon-reload
	presets=/etc/systemd/system-preset/20-ignition.preset
	if [ -f "$presets" ]; then
		# Ignition enables units through this preset file and leaves the rest to systemd's
		# first-boot preset-all; an image whose machine-id is empty is not a first boot
		# (machine-id(5)), so apply the config's presets, and only those.
		for u in $(awk '$1 == "enable" || $1 == "disable" {print $2}' "$presets"); do
			systemctl preset "$u" || die ignition-firstboot install-complete "systemctl preset $u failed"
		done
	fi
	systemctl start --no-block default.target
}

# booted [DETAIL...]: what a boot tells the host once the node is up (init.sh report_booted):
# the files the first boot's Ignition wrote, the facts, then boot-complete with the
# first-boot checks (ready.sh).
booted() {
	cfg=/boot/ignition/config.ign
	[ -f "$cfg" ] && report persisted-files ok --files-root / --ignition-config "$cfg"
	"$AGENT" agent facts --port "$PORT" --root / --boot-dir /boot --ignition-config "$cfg" \
		--storage /var/lib/containers/storage --driver vfs || echo "factory: agent facts failed" >&2
	/usr/local/lib/snofactory/ready.sh "$@"
}

# seal REQUEST: the agent prepares the running root for relocation and reports sealed; the
# freed blocks are discarded so the seed compresses well; the node powers off.
seal() {
	"$AGENT" agent seal --root / --boot-dir /boot --request "$1" --port "$PORT" || exit 1
	fstrim / 2>/dev/null || echo "factory: fstrim /: no discard support" >&2
	# The shutdown's log goes to /run, not into the sealed root's journal.
	journalctl --relinquish-var
	sync
	systemctl --no-block poweroff
	exit 0
}

commands() {
	wait_port
	# A seed at its site takes no factory commands. Its reconfiguration unit, in
	# multi-user.target, has run before this one (After=multi-user.target): report the boot
	# as the readiness report does, which is what seed boot waits for.
	[ -f /etc/snofactory/sealed.json ] && exec /usr/local/lib/snofactory/ready.sh
	if [ -e "$RUN/factory-firstboot" ]; then
		/usr/local/lib/snofactory/ready.sh --phase install-complete --detail commands=1 --detail init=systemd
	else
		for b in /sys/block/*; do
			[ "$(cat "$b/serial" 2>/dev/null)" = snofactory-seal ] && seal "/dev/${b##*/}"
		done
		booted --detail commands=1
	fi
	last=
	err=
	while :; do
		set -- --port "$PORT" --seal-request "$RUN/seal-request.json"
		[ -n "$last" ] && set -- "$@" --detail "last=$last"
		[ -n "$err" ] && set -- "$@" --detail "error=$err"
		if ! cmd=$("$AGENT" agent await "$@" 2>"$RUN/await.err"); then
			echo "factory: no command from the factory host: $(tail -n 1 "$RUN/await.err")" >&2
			exit 0
		fi
		err=
		case "$cmd" in
		freeze | thaw)
			flag=--freeze
			[ "$cmd" = thaw ] && flag=--unfreeze
			sync
			if fsfreeze "$flag" / 2>"$RUN/cmd.err"; then last=$cmd:ok; else
				last=$cmd:failed
				err=$(tail -n 1 "$RUN/cmd.err")
			fi
			;;
		report)
			booted --detail commands=1
			last=report:ok
			;;
		seal) seal "$RUN/seal-request.json" ;;
		poweroff)
			sync
			systemctl --no-block poweroff
			exit 0
			;;
		*)
			last=$cmd:failed
			err="unknown command"
			;;
		esac
	done
}

case "${1:-}" in
firstboot) firstboot ;;
commands) commands ;;
*)
	echo "usage: factory.sh firstboot|commands" >&2
	exit 2
	;;
esac
