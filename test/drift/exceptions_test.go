package drift

import (
	"fmt"
	"slices"
	"strings"
)

// exceptions are the only MachineConfig paths the seal or the site may touch, each with the
// upstream reason the machine-config daemon never sees a difference, and a condition on the
// plans that keeps the reason true.
var exceptions = []exception{
	{
		plan: planSeal, step: "pull-secret-rollout", paths: []string{"/var/lib/kubelet/config.json"},
		why: "the step only waits while the MCO renders the placeholder pull secret into a new config and the MCD " +
			"itself writes the file and currentconfig (lifecycle-agent controllers/seedgen_controller.go " +
			"waitForPullSecretOverride; machine-config-operator templates/common/_base/files/pull-secret.yaml)",
		holds: stepOnlyReads(planSeal, "pull-secret-rollout"),
	},
	{
		plan: planSite, step: "pull-secret", paths: []string{"/var/lib/kubelet/config.json"},
		why: "the site's recert, later in the plan, writes the same pull secret into config.json and into every " +
			"MachineConfig, currentconfig and mcs-machine-config-content.json (recert " +
			"src/ocp_postprocess/pull_secret_rename.rs rename_all; pull_secret_rename/filesystem_rename.rs " +
			"fix_filesystem_pull_secret, fix_filesystem_currentconfig, fix_filesystem_mcs_machine_config_content; " +
			"pull_secret_rename/etcd_rename.rs fix_machineconfigs); file_utils.rs commit_file writes in place, so the mode stays",
		holds: recertAfter("pull-secret", "--pull-secret", "--cluster-customization-dir /var/lib/kubelet",
			"--cluster-customization-dir /etc/machine-config-daemon", "--cluster-customization-file /etc/mcs-machine-config-content.json"),
	},
	{
		plan: planSite, step: "trust-bundle", paths: []string{"/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"},
		why: "the site's recert, later in the plan, writes the same bundle as user_ca_bundle into every MachineConfig, the " +
			"ControllerConfig and currentconfig (recert src/ocp_postprocess/additional_trust_bundle.rs rename_all; " +
			"additional_trust_bundle/etcd_rename.rs fix_machineconfigs, fix_controllerconfigs; filesystem_rename.rs " +
			"fix_filesystem_currentconfig), and the step writes the file 0600, the MachineConfig's mode " +
			"(machine-config-operator templates/common/_base/files/additional-trust-bundle.yaml), as lifecycle-agent's " +
			"establishEarlyCertificateTrust writes it",
		holds: recertAfter("trust-bundle", "--user-ca-bundle", "--cluster-customization-dir /etc/machine-config-daemon"),
	},
	{
		plan: planSite, step: "recert",
		why: "recert edits a MachineConfig's file only together with the MachineConfigs in etcd, currentconfig and " +
			"mcs-machine-config-content.json: certificates and keys are found in all of them as one object " +
			"(recert src/cluster_crypto/scanning.rs scans machineconfigs, **/currentconfig and " +
			"**/mcs-machine-config-content.json; json_crawl.rs scan_machineconfig), renames rewrite the files and the " +
			"MachineConfigs alike (rename_utils.rs fix_machineconfig for apiserver-url.env; proxy_rename/etcd_rename.rs " +
			"and chrony_config/etcd_rename.rs fix_machineconfigs; pull_secret_rename.rs), and file_utils.rs commit_file " +
			"writes in place, so modes stay",
		holds: recertAfter("", "--etcd-endpoint", "--crypto-dir /etc/machine-config-daemon", "--crypto-file /etc/mcs-machine-config-content.json",
			"--cluster-customization-dir /etc/machine-config-daemon", "--cluster-customization-file /etc/mcs-machine-config-content.json"),
	},
	{
		plan: planSeal, step: "recert",
		why: "the seed-time recert (force_expire) re-signs a certificate in a MachineConfig's file and in the " +
			"MachineConfigs in etcd, currentconfig and mcs-machine-config-content.json as one object (recert " +
			"src/cluster_crypto/scanning.rs, json_crawl.rs scan_machineconfig; lifecycle-agent internal/recert/recert.go " +
			"CreateRecertConfigFileForSeedCreation gives it the same directories and files)",
		holds: sealRecertReaches("/etc/machine-config-daemon", "/etc/mcs-machine-config-content.json"),
	},
	{
		plan: planSeal, step: "kubelet-disable", paths: []string{systemdDir + "kubelet.service"},
		why: "the MCD runs as a pod kubelet starts (machine-config-operator manifests/machineconfigdaemon/daemonset.yaml), " +
			"so it cannot check kubelet.service while it is disabled, and the site enables it before starting it, as " +
			"lifecycle-agent's seed creation disables it and post-pivot enables it (lca-cli/ops/ops.go StopClusterServices)",
		holds: siteEnablesBeforeStart("kubelet.service"),
	},
}

// stepOnlyReads holds when the step's command only reads the cluster (oc get): the files it
// lists are written by the MCD, not by the step.
func stepOnlyReads(plan, step string) func(plans) error {
	return func(p plans) error {
		i := stepIndex(p[plan], step)
		if i < 0 {
			return fmt.Errorf("no step %s", step)
		}
		a := p[plan][i].Argv
		if len(a) < 2 || a[0] != "oc" || !slices.Contains(a, "get") {
			return fmt.Errorf("step %s runs %q, not a read of the cluster", step, a)
		}
		return nil
	}
}

// recertAfter holds when the site plan's recert step comes after step (any position when
// step is "") and its configuration carries every one of flags.
func recertAfter(step string, flags ...string) func(plans) error {
	return func(p plans) error {
		site := p[planSite]
		r := stepIndex(site, "recert")
		if r < 0 {
			return fmt.Errorf("the site plan has no recert step")
		}
		if step != "" && stepIndex(site, step) > r {
			return fmt.Errorf("recert runs before %s", step)
		}
		for _, f := range flags {
			if !strings.Contains(site[r].Detail+" ", f+" ") {
				return fmt.Errorf("the site's recert is not given %s", f)
			}
		}
		return nil
	}
}

// siteEnablesBeforeStart holds when a site step enables unit and no earlier site step
// starts it.
func siteEnablesBeforeStart(unit string) func(plans) error {
	return func(p plans) error {
		for _, s := range p[planSite] {
			switch unitVerb(s, unit) {
			case "enable":
				return nil
			case "start", "restart":
				return fmt.Errorf("the site starts %s (step %s) before enabling it", unit, s.Name)
			}
		}
		return fmt.Errorf("the site never enables %s", unit)
	}
}

// sealRecertReaches holds when the seal's recert container is given every one of paths, the
// node's copies of the MachineConfigs it must edit alongside the files.
func sealRecertReaches(paths ...string) func(plans) error {
	return func(p plans) error {
		r := stepIndex(p[planSeal], "recert")
		if r < 0 {
			return fmt.Errorf("the seal plan has no recert step")
		}
		argv := strings.Join(p[planSeal][r].Argv, " ") + " "
		for _, path := range paths {
			if !strings.Contains(argv, " -v "+path+":"+path+" ") {
				return fmt.Errorf("the seal's recert does not mount %s", path)
			}
		}
		return nil
	}
}
