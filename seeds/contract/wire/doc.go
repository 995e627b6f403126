// Package wire is the contract between the host and the node agent: the report messages
// and their phases, the facts the agent gathers, the seal request, and the disk serials
// and port names both sides look for. The host's stages and the on-node agent both import
// it, so neither reads the other's implementation to learn the format.
//
// During a factory install the agent reports each phase over a virtio-serial port
// (DefaultPortName) as JSON lines, one Message per line:
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
// bootstrap-in-place install) in order; a failure reports its phase failed and then the
// final phase failed, both with DetailError and DetailLog. New phases are new names; the
// message format stays the same.
package wire
