#!/usr/bin/env bash
# Builds the local Debian base image the snofactory Containerfile starts from, with no
# container registry: mmdebstrap makes a minimal bookworm root file system from Debian's
# mirror, and buildah commits it as an image. Does nothing when the image already exists,
# so `make image` and the image test build it once per machine.
#
#   test/image/build-base.sh [IMAGE]      (default localhost/snofactory-base:bookworm)
#
# DEBIAN_MIRROR overrides the mirror (a depot's own); FORCE=1 rebuilds an existing image.
# Needs root (mmdebstrap and buildah write files owned by other users).
set -euo pipefail

image=${1:-localhost/snofactory-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

if [ "${FORCE:-}" != 1 ] && buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "base: $image exists (FORCE=1 rebuilds it)"
  exit 0
fi

tmp=$(mktemp -d)
ctr=
cleanup() {
  [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "base: mmdebstrap bookworm from $mirror"
# minbase: essential packages and apt only. The security and updates suites come along so
# the image gets fixes, and stay in its sources.list for the apt-get runs in the Containerfile.
mmdebstrap --quiet --variant=minbase \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$tmp/base.tar" \
  "deb $mirror bookworm main" \
  "deb $mirror bookworm-updates main" \
  "deb $security bookworm-security main"

ctr=$(buildah from scratch)
# buildah add unpacks a local tar archive, keeping owners, modes and device nodes.
buildah add --quiet "$ctr" "$tmp/base.tar" / >/dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --cmd /bin/bash --os linux --arch amd64 \
  --label org.opencontainers.image.title="Debian bookworm minbase (mmdebstrap)" "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
ctr=
echo "base: committed $image in ${SECONDS}s"
