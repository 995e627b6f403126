#!/usr/bin/env bash
# Recorded openshift-install bootkube.sh, trimmed to its outline for the test stand-in.
set -euoE pipefail
. /usr/local/bin/release-image.sh
mkdir --parents /etc/kubernetes/{manifests,bootstrap-configs,bootstrap-manifests}
echo "Rendering cluster manifests from /opt/openshift/manifests and /opt/openshift/openshift..."
cp --recursive /opt/openshift/openshift/* /opt/openshift/manifests/ 2>/dev/null || true
touch /opt/openshift/.bootkube.done
