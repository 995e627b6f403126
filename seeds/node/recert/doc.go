// Package recert is how snofactory drives recert (rh-ecosystem-edge/recert) on an
// OpenShift node: one Config for both of its uses, the seed-time run that force-expires
// every certificate and defragments etcd before a seed ships, and the site run that renames
// the cluster, rewrites the pull secret and the kubeadmin password hash and re-signs every
// certificate from now on. Args turns a Config into recert's command line, and Check holds
// that line against recert's own CLI definition (cli-contract.txt, written down from
// src/config/cli.rs), so a command that recert would refuse never reaches a node. The
// container command lines (the standalone etcd recert edits through, and recert itself)
// follow lifecycle-agent's (lca-cli/ops/ops.go RunUnauthenticatedEtcdServer, RunRecert).
package recert
