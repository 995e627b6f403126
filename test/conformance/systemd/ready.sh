#!/bin/sh
# Reports boot-complete to the host over the agent's virtio-serial port once the default
# target is reached, with what a test checks of a first boot: the state of the target and
# of the services, the generated machine-id and SSH host keys, the NICs and how
# NetworkManager sees them.
set -u
keys=
for t in rsa ecdsa ed25519; do
	f=/etc/ssh/ssh_host_${t}_key.pub
	[ -s "$f" ] && keys="$keys${keys:+,}$t:$(ssh-keygen -lf "$f" | awk '{print $2}')"
done
nics=
for d in /sys/class/net/*; do
	n=${d##*/}
	[ "$n" = lo ] && continue
	nics="$nics${nics:+,}$n=$(cat "$d/address")/$(basename "$(readlink -f "$d/device/driver")")"
done
# Why each failed unit failed: the last lines of its journal.
failed=$(systemctl list-units --failed --plain --no-legend | awk '{print $1}' | paste -sd, -)
why=
for u in $(echo "$failed" | tr , ' '); do
	why="$why$u: $(journalctl -b -u "$u" -o cat --no-pager | tail -n 3 | paste -sd'|' -); "
done
firstboot=no
[ -e /run/snofactory/firstboot ] && firstboot=yes
exec /usr/local/bin/snofactory agent report --port org.snofactory.agent.0 --phase boot-complete --status ok \
	--detail mode=systemd \
	--detail "target=$(systemctl show -p ActiveState --value multi-user.target)" \
	--detail "failed=$failed" --detail "failed_why=$why" \
	--detail "machine_id=$(cat /etc/machine-id)" \
	--detail "firstboot=$firstboot" \
	--detail "ssh_host_keys=$keys" \
	--detail "sshd=$(systemctl is-active ssh.service)" \
	--detail "chronyd=$(systemctl is-active chrony.service)" \
	--detail "networkmanager=$(systemctl is-active NetworkManager.service)" \
	--detail "nics=$nics" \
	--detail "nm_devices=$(nmcli -t -f DEVICE,TYPE,STATE device | grep -v '^lo:' | paste -sd, -)" \
	--detail "kernel=$(uname -r)"
