package payload

// Components every payload has, because stages look them up by name.
const (
	NameCVO             = "cluster-version-operator"
	NameInstaller       = "installer"
	NameMachineOSImages = "machine-os-images"
	NamePod             = "pod"
)

// componentNames are tag names of the kind real payloads carry. The first
// entries are the ones stages look up, so every payload size has them.
var componentNames = []string{
	NameCVO, NameInstaller, NameMachineOSImages, NamePod, "cli", "rhel-coreos",
	"machine-config-operator", "etcd", "hyperkube", "cluster-etcd-operator",
	"cluster-kube-apiserver-operator", "cluster-kube-controller-manager-operator",
	"cluster-kube-scheduler-operator", "cluster-openshift-apiserver-operator",
	"openshift-apiserver", "oauth-server", "oauth-apiserver", "cluster-authentication-operator",
	"cluster-network-operator", "ovn-kubernetes", "multus-cni", "multus-admission-controller",
	"container-networking-plugins", "network-metrics-daemon", "coredns", "cluster-dns-operator",
	"haproxy-router", "cluster-ingress-operator", "service-ca-operator", "cluster-config-operator",
	"cluster-policy-controller", "cluster-storage-operator", "csi-snapshot-controller",
	"csi-snapshot-controller-operator", "cluster-node-tuning-operator", "cluster-machine-approver",
	"machine-api-operator", "cluster-autoscaler", "cluster-autoscaler-operator",
	"cluster-baremetal-operator", "baremetal-installer", "ironic", "ironic-agent",
	"cluster-monitoring-operator", "prometheus", "prometheus-operator", "prometheus-config-reloader",
	"prometheus-node-exporter", "prometheus-alertmanager", "kube-state-metrics", "thanos",
	"telemeter", "kube-rbac-proxy", "console", "console-operator", "cluster-samples-operator",
	"cluster-image-registry-operator", "docker-registry", "operator-lifecycle-manager",
	"operator-registry", "cluster-olm-operator", "operator-marketplace", "insights-operator",
	"cluster-cloud-controller-manager-operator", "cloud-credential-operator",
	"cluster-csi-snapshot-controller-operator", "kube-storage-version-migrator",
	"cluster-kube-storage-version-migrator-operator", "openshift-controller-manager",
	"cluster-openshift-controller-manager-operator", "route-controller-manager",
	"cluster-bootstrap", "keepalived-ipfailover", "baremetal-runtimecfg", "tools", "must-gather",
	"deployer", "builder", "cluster-update-keys", "driver-toolkit", "egress-router-cni",
	"kuryr-cni", "whereabouts", "sdn", "kube-proxy", "ovirt-machine-controllers",
	"aws-machine-controllers", "azure-machine-controllers", "gcp-machine-controllers",
	"vsphere-csi-driver", "vsphere-csi-driver-operator", "aws-ebs-csi-driver",
	"aws-ebs-csi-driver-operator", "gcp-pd-csi-driver", "gcp-pd-csi-driver-operator",
	"azure-disk-csi-driver", "azure-disk-csi-driver-operator", "csi-external-attacher",
	"csi-external-provisioner", "csi-external-resizer", "csi-external-snapshotter",
	"csi-livenessprobe", "csi-node-driver-registrar", "local-storage-static-provisioner",
	"cluster-capi-operator", "cluster-api", "hypershift", "agent-installer-api-server",
	"agent-installer-csr-approver", "agent-installer-node-agent", "agent-installer-orchestrator",
	"agent-installer-utils", "installer-artifacts", "oc-mirror", "openstack-machine-api-provider",
	"openstack-cinder-csi-driver", "openstack-cinder-csi-driver-operator", "ibm-cloud-controller-manager",
	"ibm-vpc-block-csi-driver", "ibm-vpc-block-csi-driver-operator", "nutanix-machine-controllers",
	"powervs-machine-controllers", "cluster-control-plane-machine-set-operator", "machine-os-content",
	"cluster-kube-cluster-api-operator", "cluster-platform-operators-manager", "frr",
	"metallb-operator", "network-tools", "network-interface-bond-cni", "ovn-kubernetes-microshift",
	"lifecycle-agent-placeholder", "container-networking-plugins-microshift", "pod-identity-webhook",
	"cluster-version-operator-tests", "openshift-state-metrics", "configmap-reloader",
	"prom-label-proxy", "monitoring-plugin", "kube-metrics-server", "service-ca-bundle-injector",
	"etcd-backup", "apiserver-network-proxy", "alibaba-cloud-controller-manager",
	"azure-cloud-controller-manager", "aws-cloud-controller-manager", "gcp-cloud-controller-manager",
	"vsphere-cloud-controller-manager", "openstack-cloud-controller-manager",
	"cluster-olm-catalogd", "operator-controller", "olm-rukpak", "csi-driver-shared-resource",
	"cluster-kube-descheduler-operator",
}
