#!/usr/bin/env bash
# Builds the programs of a real single-node Kubernetes with Tekton for test/kube, once, into
# build/kube/node/: kube-controller-manager, kube-scheduler and kubelet from k8s.io/kubernetes
# (in test/kubeapi/build.sh's module, so the packages the apiserver shares compile once; the
# apiserver is that script's, versioned there), and Tekton Pipelines' controller, entrypoint,
# nop and workingdirinit, with Tekton's CRDs and config maps beside them. Only what the
# harness runs: no kubectl (it talks to the API with client-go); the scheduler stays, as
# Tekton's pods name no node. Pinned versions, through the module proxy only; a no-op once
# the stamp matches.
#
# Binaries built from the module proxy report the version "v0.0.0-master+$Format:%H$",
# which Tekton's minimum-version check (knative.dev/pkg/version, CheckMinimumVersion)
# refuses, so the version variables the release build sets (hack/lib/version.sh,
# kube::version::ldflags) are set here with -X, as test/kubeapi/build.sh does.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/test/kubeapi/build.sh" # the module in build/kube/src
out=$top/build/kube/node
src=$top/build/kube/src
kube_version=v1.34.4
tekton=github.com/tektoncd/pipeline@v1.6.0
stamp="kube $kube_version; $tekton; k8schain without cloud keychains, no KMS providers"
if [ "$(cat "$out/stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 PATH=/usr/local/go/bin:$PATH
rm -rf "$out" && mkdir -p "$out/tekton"
start=$(date +%s)

kube_cmds=(kube-controller-manager kube-scheduler kubelet)
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
rm -rf "$tsrc" && mkdir -p "$tsrc"
tdir=$(cd "$tsrc" && go mod download -json "$tekton" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
# The version Tekton's go.mod requires of module $1.
tekton_requires() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$tdir/go.mod"; }

# The controller pulls in the AWS, Azure and Google cloud SDKs, which a test cluster never
# uses: it has no cloud credentials. Without them this module's build from an empty Go cache
# took 607 CPU-seconds (user+sys) instead of 721 on a 2-core machine (-16%, 296 fewer
# packages; the k8schain stand-in alone removes 30). They come in two ways, each
# replaced here by a small local module of the same path, generated rather than vendored:
# - go-containerregistry's pkg/authn/k8schain (a module of its own) chains the cloud
#   keychains (ECR, ACR, GCR) after the Kubernetes one. Tekton calls k8schain.New with
#   k8schain.Options only (pkg/pod/entrypoint_lookup_impl.go, entrypointCache.get;
#   pkg/resolution/resolver/bundle/resolver.go, ResolveRequest); the stand-in returns
#   pkg/authn/kubernetes's keychain alone (service account and pull secrets), without
#   authn.DefaultKeychain either, so the controller, a host process here, never reads the
#   host's docker credentials.
# - Tekton's trusted resources verifier (pkg/trustedresources/verifier/verifier.go) imports
#   sigstore's KMS providers (aws, azure, gcp, hashivault) for their init functions only:
#   empty packages register none, and a VerificationPolicy naming a KMS key is refused,
#   which no test uses.
stub=$tsrc/stub
kc=github.com/google/go-containerregistry/pkg/authn/k8schain
mkdir -p "$stub/k8schain"
{
	echo "module $kc"
	echo
	echo "go 1.24"
	echo
	for m in github.com/google/go-containerregistry github.com/google/go-containerregistry/pkg/authn/kubernetes k8s.io/api k8s.io/client-go; do
		echo "require $m $(tekton_requires "$m")"
	done
} >"$stub/k8schain/go.mod"
cat >"$stub/k8schain/k8schain.go" <<'GO'
// Package k8schain is the test cluster's stand-in for go-containerregistry's: the
// Kubernetes keychain only, without the cloud keychains (see test/kube/build.sh).
package k8schain

import (
	"context"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"k8s.io/client-go/kubernetes"
)

// Options is the upstream package's: kubernetes.Options.
type Options = kauth.Options

// New returns the keychain of opt's service account and pull secrets.
func New(ctx context.Context, client kubernetes.Interface, opt Options) (authn.Keychain, error) {
	return kauth.New(ctx, client, opt)
}
GO
replaces=("$kc => ./stub/k8schain")
for p in aws azure gcp hashivault; do
	m=github.com/sigstore/sigstore/pkg/signature/kms/$p
	mkdir -p "$stub/kms/$p"
	printf 'module %s\n\ngo 1.24\n' "$m" >"$stub/kms/$p/go.mod"
	printf '// Package %s registers no KMS provider: see test/kube/build.sh.\npackage %s\n' "$p" "$p" >"$stub/kms/$p/doc.go"
	replaces+=("$m => ./stub/kms/$p")
done
{
	echo "module snofactory.test/tekton"
	echo
	echo "go 1.24"
	echo
	echo "require ${tekton/@/ }"
	# A dependency's replace directives are ignored: carry Tekton's own.
	sed -n '/^replace (/,/^)/p; /^replace [^(]/p' "$tdir/go.mod"
	for r in "${replaces[@]}"; do echo "replace $r"; done
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
