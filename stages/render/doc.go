// Package render is the render stage: it produces the Ignition configs (and, for OpenShift,
// the manifests) a factory install boots with.
//
// For the openshift target it writes a single-node bootstrap-in-place install-config.yaml
// from typed values, runs `openshift-install create manifests`, adds render's manifests to the
// installer's openshift/ directory, and runs `openshift-install create
// single-node-ignition-config`. The manifests are the relocatable-seed MachineConfigs (one per
// concern: internal IP on br-ex, kubelet/CRI-O node IP, the site reconfiguration service,
// the kubelet client certificate window), the user's Butane fragments translated with the
// Butane openshift variant of the release (a fragment with metadata becomes its own
// MachineConfig; fragments without are merged in order into 99-master-snofactory-fragments)
// and, with a worker config, an IngressController that keeps the router on the master.
//
// The OpenShift install phases the install stage follows (wire.OpenShiftInstallPhases) are
// reported by units render adds: live-booted, bootkube-done and written-to-disk by units it
// appends to the installer's bootstrap-in-place config (the live system), rebooted-from-disk,
// api-up, bootstrap-complete and install-complete by units in the MachineConfig
// 90-master-snofactory-install-phases (the installed system). Each runs
// /usr/local/bin/snofactory-phase (node/snofactory-phase.sh), which takes the agent binary
// from the precache data disk (a tar; entry agent/snofactory) so it never travels in
// Ignition, waits for its phase, and reports it once; a failure carries the journal of the
// installer unit doing the work. Without the agent's virtio-serial port (any machine but a
// factory VM) the units do nothing. After install-complete (or boot-complete on a later
// factory boot) the node stays up: snofactory-factory (node/snofactory-factory.sh) asks the
// factory host for each next command (freeze and thaw for the host's snapshot of the
// installed disk, report for validation, seal, poweroff), so a build boots the node once.
//
// The release the installer installs (OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE) comes from
// the resolve stage's lock (Options.FromResolve, read through its handoff record): its
// release repository pinned by digest, so a tag that moved after resolve cannot change the
// cluster; an empty OpenShift.Version is the lock's release version. Outside a build
// (snofactory render) the Options' values stand.
//
// For the coreos target it translates snofactory's own units (snofactory-agent.service,
// which reports install phases) and then the user's fragments with Butane's fcos variant,
// and merges them in that order with Ignition's merge rules into one config of the target's
// spec version (fcos 1.3.0/1.4.0/1.5.0/1.6.0 → Ignition 3.2.0/3.3.0/3.4.0/3.5.0; older
// fragments are translated up, newer ones refused).
//
// Every Ignition config is parsed with the Ignition spec package of its version before it
// leaves the stage, and every MachineConfig must parse as one with a valid spec.config.
// Butane warnings fail the render (as butane --strict). The same Options give the same bytes:
// nothing carries a time, maps are sorted, JSON is encoded from structs. (The real
// openshift-install generates fresh certificates on every run, so its config.ign, kubeconfig
// and password differ between runs; everything render writes itself does not.)
//
// Output layout, read by later stages by convention:
//
//	ignition/config.ign   the config to embed in the live ISO: for openshift the installer's
//	                      bootstrap-in-place config, which embeds the pull secret and so is
//	                      written 0600 and marked secret in render.json; for coreos the merged
//	                      config (0600 too when it carries an SSH key)
//	ignition/worker.ign   with Options.WorkerIgnition (openshift): the day-2 worker pointer
//	                      config (api-int:22623/config/worker, trusting the cluster root CA)
//	manifests/*.yaml      openshift: install-config.yaml with the pull secret and SSH key
//	                      REDACTED (unless Options.KeepSecrets), the MachineConfigs and the
//	                      IngressController that were given to the installer
//	auth/kubeconfig, auth/kubeadmin-password (0600), metadata.json
//	                      openshift: the installer's credentials and cluster metadata
//	render.json           what was produced, with Ignition versions, manifest kinds, what
//	                      became of each fragment, the relocation settings and tool versions
//
// The real pull secret goes only to the installer's temporary working directory, which is
// removed when the stage ends. Secrets never appear in manifests/, render.json or logs.
//
// (d), the kubelet client certificate: no KubeletConfig field sets its lifetime (the signer
// in kube-controller-manager issues 30-day certificates), so render writes
// /etc/snofactory/shipment.json on the node (and the same window into render.json) for
// validate to check. Nothing renews it at the seal: the seal's recert ends every
// certificate's life, and the site's recert starts it again on the site's first boot.
//
// The code reads top-down: stage.go (New, run) picks coreos.go or openshift.go, the
// target's flow; openshift.go's steps live in manifests.go (the MachineConfigs and
// manifests render adds), installer.go (running openshift-install and keeping its
// outputs) and release.go (pinning the release); report.go is render.json.
package render
