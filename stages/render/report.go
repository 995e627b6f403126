package render

import (
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// Report is render.json: what render produced, so later stages need not guess.
type Report struct {
	Target       oskind.Kind `json:"target"`
	StageVersion string      `json:"stageVersion"`
	// Ignition maps "config" (and "worker") to the produced Ignition configs.
	Ignition map[string]IgnitionFile `json:"ignition"`
	// Manifests lists manifests/*.yaml.
	Manifests []ManifestFile `json:"manifests,omitempty"`
	// Fragments says what became of each Butane fragment, in order.
	Fragments []FragmentResult `json:"fragments,omitempty"`
	// SiteKeys are the fingerprints of the site-config keys put on the node.
	SiteKeys []string `json:"siteKeys,omitempty"`
	// Relocation echoes the relocation settings the MachineConfigs carry.
	Relocation *RelocationReport `json:"relocation,omitempty"`
	// Cluster is what the install-config fixes that a site must match (openshift).
	Cluster *ClusterReport `json:"cluster,omitempty"`
	// ContainerStorage is the /var/lib/containers partition the install makes (openshift).
	ContainerStorage *ContainerStorageReport `json:"containerStorage,omitempty"`
	// Release is the release the installer was told to install (openshift).
	Release *ReleaseReport `json:"release,omitempty"`
	// Installer lists the openshift-install outputs kept (auth/*, metadata.json).
	Installer map[string]string `json:"installer,omitempty"`
	// Tools are the libraries and external tools used, with versions.
	Tools map[string]string `json:"tools"`
}

// IgnitionFile is one produced Ignition config.
type IgnitionFile struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Size    int    `json:"size"`
	// Secret marks configs that embed secrets (written 0600; never publish them).
	Secret bool `json:"secret,omitempty"`
}

// ManifestFile is one file in manifests/.
type ManifestFile struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	// IgnitionVersion is a MachineConfig's spec.config version.
	IgnitionVersion string `json:"ignitionVersion,omitempty"`
	// Concern is what a relocation MachineConfig is for.
	Concern string `json:"concern,omitempty"`
	// Redacted marks an install-config whose secrets were replaced.
	Redacted bool `json:"redacted,omitempty"`
}

// FragmentResult is what one Butane fragment became.
type FragmentResult struct {
	Name    string `json:"name"`
	Variant string `json:"variant"`
	Version string `json:"version"`
	// Output is the manifest it became, or the config it was merged into.
	Output string `json:"output"`
}

// RelocationReport is the relocation settings as the MachineConfigs carry them.
type RelocationReport struct {
	InternalIP                   string `json:"internalIP"`
	NodeIPHint                   string `json:"nodeIPHint"`
	ReconfigureUnit              string `json:"reconfigureUnit"`
	ShipmentFile                 string `json:"shipmentFile"`
	KubeletClientCertMinValidity string `json:"kubeletClientCertMinValidity"`
	// MachineConfigs are the names of the relocation MachineConfigs.
	MachineConfigs []string `json:"machineConfigs"`
}

// ClusterReport is what the seed's fit record takes from the install-config.
type ClusterReport struct {
	// MachineNetwork are the install-config's networking.machineNetwork CIDRs.
	MachineNetwork []string `json:"machineNetwork"`
	// FIPS is the install-config's fips.
	FIPS bool `json:"fips,omitempty"`
	// Proxy: the install-config has a proxy.
	Proxy bool `json:"proxy,omitempty"`
}
