// Package agent is the on-node side of snofactory: the same static binary runs inside the
// factory VM (and later on the shipped node) in "agent" mode, reports each install phase
// to the host, gathers the facts validate checks (and the installed OS packages and
// snofactory binaries the seed's SBOM lists), and seals the node at the seal stage's
// request. What it says to the host, and what the host asks of it, is the contract in
// package wire; this package only implements the node's side of it.
//
// On a node without systemd (the conformance OS), EnabledUnits and UnitRunner start the
// services Ignition enabled.
package agent
