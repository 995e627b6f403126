package render

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// The install-config types below carry the field names of openshift/installer's
// pkg/types.InstallConfig (apiVersion v1) for the parts a single-node bootstrap-in-place
// install on platform none uses. They are our own, smaller types: the installer's module is
// far too heavy to import for one file.

// InstallConfig is install-config.yaml.
type InstallConfig struct {
	APIVersion            string              `yaml:"apiVersion" json:"apiVersion"`
	BaseDomain            string              `yaml:"baseDomain" json:"baseDomain"`
	Metadata              ObjectMeta          `yaml:"metadata" json:"metadata"`
	AdditionalTrustBundle string              `yaml:"additionalTrustBundle,omitempty" json:"additionalTrustBundle,omitempty"`
	Compute               []MachinePool       `yaml:"compute" json:"compute"`
	ControlPlane          MachinePool         `yaml:"controlPlane" json:"controlPlane"`
	Networking            Networking          `yaml:"networking" json:"networking"`
	Platform              Platform            `yaml:"platform" json:"platform"`
	BootstrapInPlace      BootstrapInPlace    `yaml:"bootstrapInPlace" json:"bootstrapInPlace"`
	ImageDigestSources    []ImageDigestSource `yaml:"imageDigestSources,omitempty" json:"imageDigestSources,omitempty"`
	PullSecret            string              `yaml:"pullSecret" json:"pullSecret"`
	SSHKey                string              `yaml:"sshKey,omitempty" json:"sshKey,omitempty"`
	// FIPS is the installer's types.InstallConfig FIPS: the cluster runs in FIPS mode.
	FIPS bool `yaml:"fips,omitempty" json:"fips,omitempty"`
	// Proxy is the installer's types.InstallConfig Proxy: the cluster-wide proxy, which the
	// installer turns into the Proxy config CR (pkg/asset/manifests/proxy.go).
	Proxy *Proxy `yaml:"proxy,omitempty" json:"proxy,omitempty"`
}

// ObjectMeta holds the cluster name.
type ObjectMeta struct {
	Name string `yaml:"name" json:"name"`
}

// MachinePool is controlPlane or one compute entry.
type MachinePool struct {
	Name           string `yaml:"name" json:"name"`
	Replicas       int64  `yaml:"replicas" json:"replicas"`
	Hyperthreading string `yaml:"hyperthreading,omitempty" json:"hyperthreading,omitempty"`
}

// Networking is the cluster's networks.
type Networking struct {
	NetworkType    string                `yaml:"networkType" json:"networkType"`
	ClusterNetwork []ClusterNetworkEntry `yaml:"clusterNetwork" json:"clusterNetwork"`
	MachineNetwork []MachineNetworkEntry `yaml:"machineNetwork" json:"machineNetwork"`
	ServiceNetwork []string              `yaml:"serviceNetwork" json:"serviceNetwork"`
}

// ClusterNetworkEntry is one pod network.
type ClusterNetworkEntry struct {
	CIDR       string `yaml:"cidr" json:"cidr"`
	HostPrefix int32  `yaml:"hostPrefix" json:"hostPrefix"`
}

// MachineNetworkEntry is one node network.
type MachineNetworkEntry struct {
	CIDR string `yaml:"cidr" json:"cidr"`
}

// Platform is platform none: the node is installed from the live ISO, no cloud.
type Platform struct {
	None *struct{} `yaml:"none" json:"none"`
}

// BootstrapInPlace makes the install single-node: the live system bootstraps itself and
// writes the OS to InstallationDisk.
type BootstrapInPlace struct {
	InstallationDisk string `yaml:"installationDisk" json:"installationDisk"`
}

// ImageDigestSource is one mirror set for images pulled by digest.
type ImageDigestSource struct {
	Source  string   `yaml:"source" json:"source"`
	Mirrors []string `yaml:"mirrors" json:"mirrors"`
}

// The installer's defaults, written out so the file says what the cluster gets.
var (
	defaultMachineNetwork = []string{"10.0.0.0/16"}
	defaultClusterNetwork = []ClusterNetwork{{CIDR: "10.128.0.0/14", HostPrefix: defaultHostPrefix}}
	defaultServiceNetwork = []string{"172.30.0.0/16"}
)

// Default host prefixes by address family.
const (
	defaultHostPrefix  = 23
	defaultHostPrefix6 = 64
)

// redacted replaces secret values in the copies of install-config.yaml render keeps.
const redacted = "REDACTED: supplied to openshift-install from the secrets channel, never stored in outputs"

// installConfig builds the install-config for c with the given pull secret and SSH key.
func installConfig(c *OpenShift, pullSecret, sshKey string) InstallConfig {
	or := func(v, def []string) []string {
		if len(v) > 0 {
			return v
		}
		return def
	}
	ic := InstallConfig{
		APIVersion:            "v1",
		BaseDomain:            c.BaseDomain,
		Metadata:              ObjectMeta{Name: c.ClusterName},
		AdditionalTrustBundle: c.AdditionalTrustBundle,
		// One master, no workers: the single node runs everything. Day-2 workers join later
		// through worker.ign and do not appear here.
		ControlPlane: MachinePool{Name: "master", Replicas: 1, Hyperthreading: "Enabled"},
		Compute:      []MachinePool{{Name: "worker", Replicas: 0, Hyperthreading: "Enabled"}},
		Networking: Networking{
			NetworkType:    "OVNKubernetes",
			ServiceNetwork: or(c.ServiceNetwork, defaultServiceNetwork),
		},
		Platform:         Platform{None: &struct{}{}},
		BootstrapInPlace: BootstrapInPlace{InstallationDisk: c.InstallationDisk},
		PullSecret:       pullSecret,
		SSHKey:           sshKey,
		FIPS:             c.FIPS,
		Proxy:            c.Proxy,
	}
	cluster := c.ClusterNetwork
	if len(cluster) == 0 {
		cluster = defaultClusterNetwork
	}
	for _, n := range cluster {
		ic.Networking.ClusterNetwork = append(ic.Networking.ClusterNetwork, ClusterNetworkEntry{CIDR: n.CIDR, HostPrefix: int32(n.hostPrefix())})
	}
	for _, n := range or(c.MachineNetwork, defaultMachineNetwork) {
		ic.Networking.MachineNetwork = append(ic.Networking.MachineNetwork, MachineNetworkEntry{CIDR: n})
	}
	for _, m := range c.Mirrors {
		ic.ImageDigestSources = append(ic.ImageDigestSources, ImageDigestSource{Source: m.Source, Mirrors: m.Mirrors})
	}
	return ic
}

// marshalYAML encodes v as YAML with two-space indentation.
func marshalYAML(v any) ([]byte, error) {
	var b bytesBuffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
