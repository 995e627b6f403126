package reconfigure

import "slices"

// MachineConfigRewrite is a node file a MachineConfig owns that site steps write, and why
// the machine-config daemon still finds no drift: its check compares every file of the
// current config with the disk (machine-config-operator pkg/daemon/on_disk_validation.go),
// so each of these is either rewritten in the MachineConfigs to match, or put back to what
// they say. A drift check reads the site's plan (its steps' Changes) against the rendered
// MachineConfigs and lets exactly these through.
type MachineConfigRewrite struct {
	// Path is a node path; one ending in "/" stands for every file under it.
	Path string `json:"path"`
	// Steps are the site steps that write it.
	Steps []string `json:"steps"`
	// Why the MachineConfigs agree with the disk afterwards, and Upstream where that is done.
	Why      string `json:"why"`
	Upstream string `json:"upstream"`
}

// MachineConfigRewrites lists the MachineConfig-owned files the OpenShift site hook writes.
func MachineConfigRewrites() []MachineConfigRewrite {
	recertCrypto := MachineConfigRewrite{Steps: []string{"recert"},
		Why: "recert re-signs each certificate and key and renames the cluster wherever it finds them, the MachineConfigs in etcd, " +
			"/etc/machine-config-daemon/currentconfig and /etc/mcs-machine-config-content.json included, so every copy changes alike",
		Upstream: "recert src/cluster_crypto/scanning.rs (machineconfigs, currentconfig, mcs-machine-config-content.json), src/cluster_crypto/cert_key_pair.rs"}
	out := []MachineConfigRewrite{
		{Path: OpenShiftPullSecretFile, Steps: []string{StepPullSecret, "recert"},
			Why: "recert's pull_secret writes the same secret into the MachineConfigs in etcd, currentconfig and /etc/mcs-machine-config-content.json; " +
				"the MCO then renders a config that carries it",
			Upstream: "recert src/ocp_postprocess/pull_secret_rename.rs rename_all (etcd_rename.rs fix_machineconfigs, filesystem_rename.rs " +
				"fix_filesystem_currentconfig, fix_filesystem_mcs_machine_config_content); lifecycle-agent lca-cli/postpivot/postpivot.go createPullSecretFile"},
		{Path: ChronyConf, Steps: []string{"ntp", "recert"},
			Why: "recert's chrony_config, the same text the ntp step writes, replaces /etc/chrony.conf in every MachineConfig, currentconfig and " +
				"/etc/mcs-machine-config-content.json that carries it (a site without NTP servers writes neither)",
			Upstream: "recert src/ocp_postprocess/chrony_config.rs; lifecycle-agent internal/recert/recert.go CreateRecertConfigFile (ChronyConfig)"},
		{Path: KubeletWantsLink, Steps: []string{"kubelet"},
			Why:      "the MachineConfig enables kubelet.service; the seal disabled it, as lifecycle-agent's seed creation does, and the site enables it again",
			Upstream: "lifecycle-agent lca-cli/postpivot/postpivot.go PostPivotConfiguration (SystemctlAction enable kubelet --now)"},
	}
	for _, p := range []string{"/etc/kubernetes/", "/var/lib/kubelet/", "/etc/machine-config-daemon/", "/etc/mcs-machine-config-content.json"} {
		r := recertCrypto
		r.Path, r.Steps = p, slices.Clone(r.Steps)
		out = append(out, r)
	}
	return out
}
