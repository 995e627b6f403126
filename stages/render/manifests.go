package render

import (
	"context"
	"fmt"

	"github.com/coreos/go-semver/semver"
)

// extraManifest is a file render adds to the installer's openshift/ directory.
type extraManifest struct {
	name string // file name in manifests/ and openshift/
	data []byte
	info ManifestFile
}

// openshiftManifests builds everything render adds to the installer's openshift/ directory:
// the install phase units, the relocation MachineConfigs, the user's fragments, and the ingress placement.
func openshiftManifests(ctx context.Context, opts Options, variant string, rep *Report) ([]extraManifest, error) {
	phases, err := phasesManifest(variant)
	if err != nil {
		return nil, err
	}
	out := []extraManifest{phases}
	if r := opts.Relocation; r != nil {
		mcs, relocation, err := relocationManifests(variant, *r)
		if err != nil {
			return nil, err
		}
		out = append(out, mcs...)
		// The relocation address is the node IP at every site, so the records can point at it.
		dns, err := dnsmasqManifest(variant, opts.OpenShift.ClusterName, opts.OpenShift.BaseDomain, *r)
		if err != nil {
			return nil, err
		}
		out = append(out, dns)
		rep.Relocation = relocation
	}
	if cs := opts.OpenShift.ContainerStorage; cs != nil {
		m, csRep, err := containerStorageManifest(variant, opts.OpenShift.InstallationDisk, *cs)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
		rep.ContainerStorage = csRep
	}
	keys, err := siteKeysManifest(opts, variant, rep)
	if err != nil {
		return nil, err
	}
	out = append(out, keys...)
	frags, results, err := fragmentManifests(ctx, opts, variant)
	if err != nil {
		return nil, err
	}
	out = append(out, frags...)
	rep.Fragments = append(rep.Fragments, results...)

	// Day-2 workers on a single-replica control plane: keep the default router on the
	// master. Upstream's installer asks for the same through the Ingress config's
	// defaultPlacement (ControlPlane on platform none with one master); the explicit
	// IngressController also pins one replica, so a new worker never attracts the router and
	// the node's address stays the only ingress address (no load balancer at the edge).
	if opts.WorkerIgnition && controlPlaneTopology(1) == "SingleReplica" {
		doc, err := marshalYAML(ingressController())
		if err != nil {
			return nil, err
		}
		file := "99-snofactory-ingresscontroller-default.yaml"
		out = append(out, extraManifest{name: file, data: doc, info: ManifestFile{Path: ManifestDir + "/" + file, Kind: "IngressController", Name: "default"}})
	}
	return out, nil
}

// machineConfigManifest is the extra manifest for a MachineConfig document.
func machineConfigManifest(what, concern string, doc []byte) (extraManifest, error) {
	name, v, err := checkMachineConfig(what, doc)
	if err != nil {
		return extraManifest{}, err
	}
	file := name + ".yaml"
	return extraManifest{name: file, data: doc, info: ManifestFile{
		Path: ManifestDir + "/" + file, Kind: "MachineConfig", Name: name, IgnitionVersion: v, Concern: concern}}, nil
}

// relocationManifests is the relocatable-seed MachineConfigs as manifests, and the settings
// they carry for render.json.
func relocationManifests(variant string, r Relocation) ([]extraManifest, *RelocationReport, error) {
	mcs, rep, err := relocationConfigs(variant, r)
	if err != nil {
		return nil, nil, err
	}
	var out []extraManifest
	for _, mc := range mcs {
		doc, err := translateOwn(mc.Config.Metadata.Name, mc.Config, false)
		if err != nil {
			return nil, nil, err
		}
		m, err := machineConfigManifest(mc.Config.Metadata.Name, mc.Concern, doc)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, m)
	}
	return out, rep, nil
}

// mergedFragments names the MachineConfig the fragments without metadata are merged into.
const mergedFragments = "99-master-snofactory-fragments"

// fragmentManifests turns the user's Butane fragments into MachineConfigs: a fragment with
// metadata is its own; the others are merged, in order, into one.
func fragmentManifests(ctx context.Context, opts Options, variant string) ([]extraManifest, []FragmentResult, error) {
	clusterSpec, err := openshiftIgnitionVersion(variant)
	if err != nil {
		return nil, nil, err
	}
	merged, err := newMerger(clusterSpec)
	if err != nil {
		return nil, nil, err
	}
	var out []extraManifest
	var results []FragmentResult
	nMerged := 0
	for i, f := range opts.Fragments {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		name, src, h, err := readOpenShiftFragment(opts, f, i, variant)
		if err != nil {
			return nil, nil, err
		}
		res := FragmentResult{Name: name, Variant: h.Variant, Version: h.Version}
		if h.Metadata != nil {
			m, err := fragmentMachineConfig(name, src)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, m)
			res.Output = m.info.Path
		} else {
			ign, err := translate(name, withPlaceholderMetadata(src), true)
			if err != nil {
				return nil, nil, err
			}
			if err := merged.add(name, ign); err != nil {
				return nil, nil, err
			}
			nMerged++
			res.Output = ManifestDir + "/" + mergedFragments + ".yaml"
		}
		results = append(results, res)
	}
	if nMerged > 0 {
		m, err := mergedMachineConfig(merged)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, m)
	}
	return out, results, nil
}

// readOpenShiftFragment reads the i-th fragment and checks that its Butane variant can
// configure the cluster's node: openshift, not newer than the cluster's.
func readOpenShiftFragment(opts Options, f Fragment, i int, variant string) (string, []byte, butaneHeader, error) {
	name, src, h, err := loadFragment(opts, f, i)
	if err != nil {
		return "", nil, h, err
	}
	if h.Variant != "openshift" {
		return "", nil, h, &ButaneError{Name: name, Err: fmt.Errorf("variant %s cannot configure an OpenShift node; use variant: openshift, version: %s", h.Variant, variant)}
	}
	if fv, err := semver.NewVersion(h.Version); err == nil && semver.New(variant).LessThan(*fv) {
		return "", nil, h, &ButaneError{Name: name, Err: fmt.Errorf("openshift %s is newer than the cluster's %s", h.Version, variant)}
	}
	return name, src, h, nil
}

// fragmentMachineConfig is a fragment with metadata: a MachineConfig of its own.
func fragmentMachineConfig(name string, src []byte) (extraManifest, error) {
	doc, err := translate(name, src, false)
	if err != nil {
		return extraManifest{}, err
	}
	return machineConfigManifest(name, "", doc)
}

// mergedMachineConfig wraps the merged fragments into their MachineConfig.
func mergedMachineConfig(merged *ignitionMerger) (extraManifest, error) {
	ign, err := merged.bytes(mergedFragments)
	if err != nil {
		return extraManifest{}, err
	}
	doc, err := wrapMachineConfig(mergedFragments, ign)
	if err != nil {
		return extraManifest{}, err
	}
	return machineConfigManifest(mergedFragments, "", doc)
}

// openshiftIgnitionVersion is the Ignition spec the Butane openshift variant emits.
func openshiftIgnitionVersion(variant string) (string, error) {
	probe := fmt.Sprintf("variant: openshift\nversion: %s\nmetadata: {name: probe, labels: {%s: master}}\n", variant, roleLabel)
	ign, err := translate("openshift "+variant+" probe", []byte(probe), true)
	if err != nil {
		return "", err
	}
	return configVersion(ign)
}

// controlPlaneTopology mirrors the installer: one control-plane replica is SingleReplica.
func controlPlaneTopology(replicas int) string {
	if replicas == 1 {
		return "SingleReplica"
	}
	return "HighlyAvailable"
}

// IngressController is the operator.openshift.io/v1 object, reduced to node placement.
type IngressController struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas      int `yaml:"replicas"`
		NodePlacement struct {
			NodeSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"nodeSelector"`
		} `yaml:"nodePlacement"`
	} `yaml:"spec"`
}

func ingressController() IngressController {
	var ic IngressController
	ic.APIVersion = "operator.openshift.io/v1"
	ic.Kind = "IngressController"
	ic.Metadata.Name = "default"
	ic.Metadata.Namespace = "openshift-ingress-operator"
	ic.Spec.Replicas = 1
	ic.Spec.NodePlacement.NodeSelector.MatchLabels = map[string]string{"node-role.kubernetes.io/master": ""}
	return ic
}
