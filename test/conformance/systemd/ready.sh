#!/bin/sh
# Reports boot-complete to the host over the agent's virtio-serial port once the default
# target is reached, with what a test checks of a first boot: the state of the target and
# of the services, the generated machine-id and SSH host keys, the NICs and how
# NetworkManager sees them; and of the site the hook applied: the addresses, bonds and
# active profiles, chrony's sources, whether the system trust store trusts the site's CA,
# and what the request through the site proxy got. Arguments are added to the report's
# (the factory's install-complete and its report command use it with another phase and
# commands=1: the last --phase wins).
set -u
keys=
for t in rsa ecdsa ed25519; do
	f=/etc/ssh/ssh_host_${t}_key.pub
	[ -s "$f" ] && keys="$keys${keys:+,}$t:$(ssh-keygen -lf "$f" | awk '{print $2}')"
done
nics=
bonds=
ports=
for d in /sys/class/net/*; do
	n=${d##*/}
	if [ -e "$d/bonding/mode" ]; then
		bonds="$bonds${bonds:+,}$n:$(cut -d' ' -f1 "$d/bonding/mode"):$(cat "$d/bonding/miimon"):$(tr ' ' + <"$d/bonding/slaves")"
		# Each port: how often the kernel enslaved it this boot (drivers/net/bonding/bond_main.c
		# bond_enslave logs "(slave PORT): Enslaving as ...") and the bond's Link Failure Count
		# for it (bond_procfs.c bond_info_show_slave): a port activated twice shows 2.
		for p in $(cat "$d/bonding/slaves"); do
			en=$(journalctl -k -b -o cat --no-pager | grep -cE "\\(slave $p\\): Enslaving|Enslaving $p as")
			lf=$(awk -v p="$p" '/^Slave Interface:/ {s = $3} /^Link Failure Count:/ && s == p {print $4}' "/proc/net/bonding/$n")
			ports="$ports${ports:+,}$p:enslaved=$en:failures=$lf"
		done
	fi
	[ -e "$d/device" ] || continue
	# A bond's port carries the bond's address; its own is the permanent one.
	mac=$(cat "$d/bonding_slave/perm_hwaddr" 2>/dev/null || cat "$d/address")
	nics="$nics${nics:+,}$n=$mac/$(basename "$(readlink -f "$d/device/driver")")"
done
# The site CA verifies against the system bundle only when the bundle holds it.
ca=/usr/local/share/ca-certificates/openshift-config-user-ca-bundle.crt
site_ca=absent
if [ -s "$ca" ]; then
	site_ca=untrusted
	openssl verify -CAfile /etc/ssl/certs/ca-certificates.crt "$ca" >/dev/null 2>&1 && site_ca=trusted
fi
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
	--detail "kernel=$(uname -r)" \
	--detail "hostname=$(hostname)" \
	--detail "addresses=$(ip -o addr show scope global | awk '{print $2 "=" $4}' | paste -sd, -)" \
	--detail "bonds=$bonds" \
	--detail "bond_ports=$ports" \
	--detail "node_labels=$(cat /etc/snofactory/node-labels 2>/dev/null | paste -sd, -)" \
	--detail "nm_active=$(nmcli -t -f NAME,TYPE,DEVICE connection show --active | grep -v ':lo$' | paste -sd, -)" \
	--detail "reconfigure=$(systemctl is-active snofactory-reconfigure.service)" \
	--detail "chrony_sources=$(chronyc -n -c sources 2>&1 | cut -d, -f3 | paste -sd, -)" \
	--detail "site_ca=$site_ca" \
	--detail "proxy_probe=$(cat /run/snofactory/proxy-probe 2>/dev/null)" "$@"
