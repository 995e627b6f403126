// Package agent is the on-node side of snofactory and the wire protocol it speaks to the
// host.
//
// The same static snofactory binary runs inside the factory VM (and later on the shipped
// node) in "agent" mode. During a factory install it reports each phase to the host over
// a virtio-serial port as JSON lines (see Message). The host reads them in order with a
// Decoder; an install or boot is finished only when the guest says so with an explicit
// final message (PhaseInstallComplete, PhaseBootComplete), never because the VM stopped.
package agent
