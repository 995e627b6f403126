#!/usr/bin/env bash
# verify-seed.sh PUBKEY REF: skopeo (build/skopeo) copies the seed REF, a registry
# reference, only if a sigstore signature by PUBKEY verifies, under a policy.json and a
# registries.d of the kind podman and skopeo read (written to a temporary directory here).
# make demo runs it; it shows a depot how to check a seed with skopeo.
set -euo pipefail
pub=$(realpath "$1")
ref=$2
repo=${ref%:*}
registry=${ref%%/*}
skopeo=$(cd "$(dirname "$0")/../.." && pwd)/build/skopeo/skopeo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/policy.json" <<JSON
{"default": [{"type": "reject"}],
 "transports": {"docker": {"$repo": [{"type": "sigstoreSigned", "keyPath": "$pub"}]}}}
JSON
mkdir "$tmp/registries.d"
printf 'docker:\n  %s:\n    use-sigstore-attachments: true\n' "$registry" >"$tmp/registries.d/seeds.yaml"
"$skopeo" --policy "$tmp/policy.json" --registries.d "$tmp/registries.d" --tmpdir "$tmp" \
	copy --src-tls-verify=false --all --preserve-digests --remove-signatures --quiet "docker://$ref" "oci:$tmp/seed:seed"
echo "skopeo verified the signature of $ref with $1"
