package v1alpha1

// KnownCheckIDs are the ids of the validation gate's checks, which spec.validation.skip
// and skipReasons may name. The list is a copy of stages/validate's KnownChecks (a
// blueprint does not import the stages); a test there keeps the two equal.
func KnownCheckIDs() []string {
	return []string{
		"host.boot.from-disk",
		"host.ignition.files",
		"host.ignition.units",
		"host.ignition.users",
		"host.images.present",
		"host.bootstrap.cleaned",
		"host.disk.free-space",
		"host.time.sync",
		"host.facts.complete",
		"host.dns.cluster-names",
		"openshift.clusterversion",
		"openshift.clusteroperators",
		"openshift.node.ready",
		"openshift.etcd.endpoints",
		"openshift.csr.none-pending",
		"openshift.infrastructure.topology",
		"openshift.machineconfigpool.updated",
		"openshift.relocation.machineconfigs",
		"openshift.ingress.pinned",
		"certs.kubelet-client",
		"certs.kubelet-serving",
		"certs.api-serving",
	}
}
