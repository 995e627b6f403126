#!/usr/bin/env bash
# Builds cosign, pinned, from the Go module proxy into build/cosign/, once: the tests of
# seed signing check our signatures with it, a verifier nobody here wrote. (Debian's skopeo
# cannot: its build disables sigstore.) A no-op after the first time.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/cosign
version=v2.6.5
if [ -x "$out/cosign" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$version" ]; then
	exit 0
fi
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
mkdir -p "$out"
echo "cosign: building cosign $version (once; cached in $out)"
GOBIN="$out/bin.tmp" go install -trimpath -ldflags='-s -w' "github.com/sigstore/cosign/v2/cmd/cosign@$version"
mv "$out/bin.tmp/cosign" "$out/cosign"
rm -rf "$out/bin.tmp"
echo "$version" >"$out/stamp"
