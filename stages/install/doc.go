// Package install is the install stage: it boots the customized live ISO in a factory VM
// (qemu, stages/internal/vm) with an empty target disk and the precache data disk, and
// follows the install through the ordered phase reports the guest's agent sends over
// virtio-serial until the explicit install-complete, never inferring success from the VM
// powering off. Each phase has its own timeout (scaled under TCG); a timeout names the
// last phase seen and shows the console's tail; a failure report from the guest carries
// its log. On failure a gather bundle (console, agent messages, QMP status) is written to
// the build's output directory.
//
// A conformance OS install also gets a small request disk (wire.InstallRequest): the root
// file system's UUID and hash seed derived from the lock's digest, and its creation time
// from SOURCE_DATE_EPOCH, so two builds of one lock make the same file system.
//
// The installed disk is the stage's output, so validate and seal reuse it without
// installing again.
package install
