#!/bin/bash
# snofactory-seal: run by snofactory-seal.service when the factory boots the installed node
# with its seal request disk (serial snofactory-seal). It installs the agent from the
# precache data disk (serial snofactory-precache, a tar whose entry agent/snofactory is the
# agent) where the site's reconfiguration service runs it, lets the agent seal the node
# (it reports each step to the factory host) and powers the node off: the factory takes
# the power-off as the clean shutdown it waits for.
set -euo pipefail

sys=${SNOFACTORY_SYS:-/sys}
root=${SNOFACTORY_ROOT:-/}
bin=${SNOFACTORY_AGENT:-/usr/local/bin/snofactory}

disk_by_serial() {
	local f
	for f in "$sys"/block/*/serial; do
		[ "$(cat "$f" 2>/dev/null)" = "$1" ] || continue
		f=${f%/serial}
		echo "/dev/${f##*/}"
		return 0
	done
	return 1
}

request=${SNOFACTORY_SEAL_REQUEST:-$(disk_by_serial snofactory-seal)}
data=${SNOFACTORY_PRECACHE_DISK:-$(disk_by_serial snofactory-precache)} || {
	echo "snofactory-seal: no precache data disk to take the agent from" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Stop at the agent instead of reading every image after it.
tar -xf "$data" --occurrence=1 -C "$tmp" agent/snofactory
install -D -m 0755 "$tmp/agent/snofactory" "$bin"
"$bin" agent seal --root "$root" --request "$request" ${SNOFACTORY_PORT:+--port "$SNOFACTORY_PORT"} \
	${SNOFACTORY_AGENT_STATE:+--state-dir "$SNOFACTORY_AGENT_STATE"}
sync
${SNOFACTORY_POWEROFF:-systemctl poweroff}
