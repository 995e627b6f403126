#!/usr/bin/env bash
# Builds the programs of a real single-node Kubernetes with Tekton for test/kube, once, into
# build/kube/node/: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kubectl from k8s.io/kubernetes (in test/kubeapi/build.sh's module, so the packages the
# apiserver shares compile once), and Tekton Pipelines' controller, entrypoint, nop and
# workingdirinit, with Tekton's CRDs and config maps beside them. Pinned versions, through
# the module proxy only; a no-op once the stamp matches.
#
# Binaries built from the module proxy report the version "v0.0.0-master+$Format:%H$",
# which Tekton's minimum-version check (knative.dev/pkg/version, CheckMinimumVersion)
# refuses, so the version variables the release build sets (hack/lib/version.sh,
# kube::version::ldflags) are set here with -X.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/test/kubeapi/build.sh" # the module in build/kube/src
out=$top/build/kube/node
src=$top/build/kube/src
kube_version=v1.34.4
tekton=github.com/tektoncd/pipeline@v1.6.0
stamp="kube $kube_version; $tekton"
if [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
rm -rf "$out" && mkdir -p "$out/tekton"
start=$(date +%s)

kube_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
{
	printf '//go:build tools\n\npackage kubeapi\n\nimport (\n'
	for c in "${kube_cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
	printf ')\n'
} >"$src/node.go"
ver=$kube_version minor=${kube_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
echo "kube: building ${kube_cmds[*]} $kube_version (once; cached in $out)"
pkgs=()
for c in "${kube_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
(cd "$src" && go mod tidy >/dev/null 2>&1 && nice -n 19 go build -trimpath -ldflags="$ldflags" -o "$out/" "${pkgs[@]}")

# Tekton builds in a module of its own: it pins older client libraries than kubernetes'.
tsrc=$top/build/kube/tekton-src
tdir=$(mkdir -p "$tsrc" && cd "$tsrc" && go mod download -json "$tekton" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
{
	echo "module snofactory.test/tekton"
	echo
	echo "go 1.24"
	echo
	echo "require ${tekton/@/ }"
	# A dependency's replace directives are ignored: carry Tekton's own.
	sed -n '/^replace (/,/^)/p; /^replace [^(]/p' "$tdir/go.mod"
} >"$tsrc/go.mod"
tekton_cmds=(controller entrypoint nop workingdirinit)
{
	printf '//go:build tools\n\npackage tekton\n\nimport (\n'
	for c in "${tekton_cmds[@]}"; do printf '\t_ "github.com/tektoncd/pipeline/cmd/%s"\n' "$c"; done
	printf ')\n'
} >"$tsrc/tools.go"
echo "kube: building Tekton's ${tekton_cmds[*]} (${tekton#*@})"
tpkgs=()
for c in "${tekton_cmds[@]}"; do tpkgs+=("github.com/tektoncd/pipeline/cmd/$c"); done
(cd "$tsrc" && go mod tidy >/dev/null 2>&1 && nice -n 19 go build -trimpath -ldflags="-s -w" -o "$out/tekton/" "${tpkgs[@]}")
mkdir -p "$out/tekton/crds" "$out/tekton/config"
install -m 0644 "$tdir"/config/300-crds/*.yaml "$out/tekton/crds/"
install -m 0644 "$tdir"/config/config-*.yaml "$out/tekton/config/"
echo "kube: built in $(($(date +%s) - start)) s"
echo "$stamp" >"$out/stamp"
