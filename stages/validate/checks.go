package validate

// Check ids.
const (
	CheckBootFromDisk      = "host.boot.from-disk"
	CheckIgnitionFiles     = "host.ignition.files"
	CheckIgnitionUnits     = "host.ignition.units"
	CheckIgnitionUsers     = "host.ignition.users"
	CheckImagesPresent     = "host.images.present"
	CheckBootstrapCleaned  = "host.bootstrap.cleaned"
	CheckDiskFreeSpace     = "host.disk.free-space"
	CheckTimeSync          = "host.time.sync"
	CheckFactsComplete     = "host.facts.complete"
	CheckClusterVersion    = "openshift.clusterversion"
	CheckClusterOperators  = "openshift.clusteroperators"
	CheckNodeReady         = "openshift.node.ready"
	CheckEtcdEndpoints     = "openshift.etcd.endpoints"
	CheckCSRNonePending    = "openshift.csr.none-pending"
	CheckTopology          = "openshift.infrastructure.topology"
	CheckPoolUpdated       = "openshift.machineconfigpool.updated"
	CheckRelocationConfigs = "openshift.relocation.machineconfigs"
	CheckIngressPinned     = "openshift.ingress.pinned"
	CheckKubeletClientCert = "certs.kubelet-client"
	CheckKubeletServeCert  = "certs.kubelet-serving"
	CheckAPIServingCert    = "certs.api-serving"
	CheckClusterDNS        = "host.dns.cluster-names"
)

// KnownChecks lists every check, in the order reports list them. blueprints/v1alpha1
// keeps a copy of the ids (KnownCheckIDs) to validate spec.validation.skip; a test keeps
// the two in step.
func KnownChecks() []CheckInfo {
	h := func(id, d string, s Severity) CheckInfo {
		return CheckInfo{ID: id, Description: d, Severity: s, Scope: ScopeHost}
	}
	o := func(id, d string) CheckInfo {
		return CheckInfo{ID: id, Description: d, Severity: SeverityError, Scope: ScopeOpenShift}
	}
	return []CheckInfo{
		h(CheckBootFromDisk, "the validation boot came from the installed disk, not the live ISO", SeverityError),
		h(CheckIgnitionFiles, "every file, directory and link of the Ignition config is on the installed root with its mode, owner and content", SeverityError),
		h(CheckIgnitionUnits, "every unit and drop-in of the Ignition config is written, enabled, disabled or masked as declared", SeverityError),
		h(CheckIgnitionUsers, "every user of the Ignition config exists with its SSH keys", SeverityError),
		h(CheckImagesPresent, "every precached image is in containers-storage with its locked digest", SeverityError),
		h(CheckBootstrapCleaned, "no bootstrap leftovers on the installed root", SeverityError),
		h(CheckDiskFreeSpace, "the root filesystem has the free space the site needs", SeverityError),
		h(CheckTimeSync, "the node's clock agrees with the factory host's", SeverityError),
		h(CheckFactsComplete, "the guest reported every fact without errors or truncation", SeverityWarning),
		h(CheckClusterDNS, "openshift: api, api-int and *.apps of the cluster resolve on the node to its address (the single-node dnsmasq)", SeverityError),
		o(CheckClusterVersion, "ClusterVersion is Available at the locked version and not Progressing or Failing"),
		o(CheckClusterOperators, "every ClusterOperator is Available and neither Degraded nor Progressing"),
		o(CheckNodeReady, "the single node is Ready"),
		o(CheckEtcdEndpoints, "the etcd member's address (openshift-etcd/etcd-endpoints) is the Node's InternalIP"),
		o(CheckCSRNonePending, "no CertificateSigningRequest is pending"),
		o(CheckTopology, "Infrastructure control plane and infrastructure topologies are SingleReplica"),
		o(CheckPoolUpdated, "the master MachineConfigPool is Updated, not Updating or Degraded"),
		o(CheckRelocationConfigs, "the relocation MachineConfigs exist and are rendered into the master pool's current config"),
		o(CheckIngressPinned, "day-2 workers: the default IngressController is pinned to the master pool (seed 002)"),
		// A warning: the signer issues kubelet client certificates for 30 days at most, so a
		// default 30-day window could never pass; the reconfiguration at the site renews
		// the certificate (recert), and the warning tells the depot how much margin is left.
		{ID: CheckKubeletClientCert, Description: "the kubelet client certificate stays valid through the shipment window (renewed at the site otherwise)",
			Severity: SeverityWarning, Scope: ScopeOpenShift},
		// Warnings too: the serving certificates last 30 days and rotate after 15 (kubelet:
		// 70-90 % of its life), and recert re-signs every one of them at the site; a window
		// they miss says how close to rotation the cluster is, not that the seed is bad.
		{ID: CheckKubeletServeCert, Description: "the kubelet serving certificate stays valid through the shipment window (re-signed at the site)",
			Severity: SeverityWarning, Scope: ScopeOpenShift},
		{ID: CheckAPIServingCert, Description: "the API server's serving certificate stays valid through the shipment window (re-signed at the site)",
			Severity: SeverityWarning, Scope: ScopeOpenShift},
	}
}
