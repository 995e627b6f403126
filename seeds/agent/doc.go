// Package agent is the on-node side of snofactory and the wire protocol it speaks to the
// host.
//
// The same static snofactory binary runs inside the factory VM (and later on the shipped
// node) in "agent" mode. During a factory install it reports each phase to the host over
// a virtio-serial port (DefaultPortName) as JSON lines, one Message per line:
//
//	{"v":1,"boot":"<kernel boot_id>","seq":3,"time":"...","uptime":7.17,
//	 "phase":"ignition-files","status":"ok","details":{"k":"v"}}
//
// seq starts at 1 on every boot and grows by one per message (the guest keeps the
// counter in a tmpfs, under a lock, because every report is its own process); the host
// reads the stream with a Decoder, which rejects out-of-order or malformed lines without
// losing the stream. An install or boot is finished only when the guest says so with an
// explicit final message (PhaseInstallComplete, PhaseBootComplete; status ok or failed),
// never because the VM stopped.
//
// An install reports the phases of InstallPhases (OpenShiftInstallPhases for an OpenShift
// bootstrap-in-place install) in order; a failure reports its phase
// failed and then the final phase failed, both with DetailError and DetailLog. On a node
// without systemd (the conformance OS), EnabledUnits and UnitRunner start the services
// Ignition enabled. Later work (site reconfiguration) adds commands next to Reporter; the
// message format stays the same and new phases are just new names.
package agent
