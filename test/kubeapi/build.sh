#!/usr/bin/env bash
# Builds a real kube-apiserver from k8s.io/kubernetes through the Go module proxy into
# build/kube/, and copies OpenShift's own CRDs (github.com/openshift/api) beside it, once:
# the tests of the cluster checks run against them. The module that builds the server is
# generated here, outside the repository's go.mod: kubernetes is not a dependency of
# snofactory, only of its tests' server. About 10 CPU-minutes the first time; a no-op after.
#
# Binaries built from the module proxy report the version "v0.0.0-master+$Format:%H$",
# which Tekton's minimum-version check (knative.dev/pkg/version, CheckMinimumVersion)
# refuses when test/kube runs this server, so the version variables the release build sets
# (hack/lib/version.sh, kube::version::ldflags) are set here with -X, and the cluster of
# test/kube needs no second apiserver.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/kube
kube_version=v1.34.4
staging_version=v0.34.4 # the staging modules of kube_version
openshift_api=github.com/openshift/api@v0.0.0-20260318185450-1f2fa3f09f4e
stamp="kube-apiserver $kube_version (versioned); $openshift_api"
if [ -x "$out/kube-apiserver" ] && [ -d "$out/crds" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
src=$out/src
rm -rf "$src" "$out/crds" && mkdir -p "$src" "$out/crds"

kmod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$kube_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
	echo "module snofactory.test/kubeapi"
	echo
	echo "go 1.24"
	echo
	echo "require k8s.io/kubernetes $kube_version"
	echo
	echo "replace ("
	# kubernetes points its staging modules at its own tree; the proxy serves them as v0.N.
	grep -o 'k8s.io/[a-z-]* => ./staging' "$kmod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
	echo ")"
} >"$src/go.mod"
printf '//go:build tools\n\npackage kubeapi\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >"$src/tools.go"
minor=${kube_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
echo "kubeapi: building kube-apiserver $kube_version (once; cached in $out)"
(cd "$src" && go mod tidy >/dev/null 2>&1 && nice -n 19 go build -trimpath -ldflags="$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"

api=$(cd "$src" && go mod download -json "$openshift_api" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
for crd in \
	config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml \
	config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml \
	config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml \
	machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigpools-Default.crd.yaml \
	machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigs.crd.yaml \
	operator/v1/zz_generated.crd-manifests/0000_50_ingress_00_ingresscontrollers.crd.yaml; do
	install -m 0644 "$api/$crd" "$out/crds/"
done
echo "$stamp" >"$out/stamp"
