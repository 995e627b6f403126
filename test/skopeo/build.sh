#!/usr/bin/env bash
# Builds skopeo, pinned, from the Go module proxy into build/skopeo/, once: the tests of
# seed signing check our signatures with it (policy.json sigstoreSigned, registries.d
# use-sigstore-attachments) and have it sign seeds for ours to check. Debian's skopeo cannot:
# its build disables sigstore. go.mod and go.sum here pin it and everything it links; this
# directory is a module of its own, so the project's module never depends on it. A no-op
# after the first time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$top/build/skopeo
version=$(awk '$1 == "require" && $2 == "github.com/containers/skopeo" {print $3}' "$here/go.mod")
if [ -x "$out/skopeo" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$version" ]; then
	exit 0
fi
export GOFLAGS=-mod=readonly GOWORK=off CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
mkdir -p "$out"
echo "skopeo: building skopeo $version (once; cached in $out)"
cd "$here"
go build -trimpath -ldflags='-s -w' -tags containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper \
	-o "$out/skopeo.tmp" github.com/containers/skopeo/cmd/skopeo
mv "$out/skopeo.tmp" "$out/skopeo"
echo "$version" >"$out/stamp"
