// Package seedinfo is the seed cluster info: what the seal reads from the running cluster's
// objects before it stops the cluster, and what the site reconfiguration takes as the
// seed's identity (the names and addresses recert replaces). Its JSON keys are
// lifecycle-agent's (lca-cli/seedclusterinfo/seedclusterinfo.go SeedClusterInfo), so the
// file reads the same as an image-based seed's manifest.json.
package seedinfo

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// File is where the seal writes the info on the node, under its root. It sits in /var,
// so it ships inside the seed, and it is not under /etc/hostname's reach: LCA reads the
// identity from cluster objects, never from the node's files.
const File = "/var/lib/snofactory/seed-cluster-info.json"

// maxSize bounds what Read takes: the info is a few hundred bytes.
const maxSize = 1 << 20

// Info is the seed cluster's identity.
type Info struct {
	// OCPVersion is ClusterVersion status.desired.version.
	OCPVersion string `json:"seed_cluster_ocp_version"`
	// BaseDomain and ClusterName come from the install-config in kube-system/cluster-config-v1.
	BaseDomain  string `json:"base_domain"`
	ClusterName string `json:"cluster_name"`
	// NodeIPs are the Node's InternalIP addresses, IPv4 first.
	NodeIPs []string `json:"node_ips"`
	// MachineNetworks are the install-config's networking.machineNetwork CIDRs.
	MachineNetworks []string `json:"machine_networks,omitempty"`
	// ClusterNetworks and ServiceNetworks are networking.clusterNetwork[].cidr and
	// networking.serviceNetwork: a site proxy's noProxy takes them, as lifecycle-agent's
	// post-pivot takes its seed's (setProxyAndProxyStatus).
	ClusterNetworks []string `json:"cluster_network_cidr,omitempty"`
	ServiceNetworks []string `json:"service_network_cidr,omitempty"`
	// Hostname is the Node's status address of type Hostname.
	Hostname string `json:"sno_hostname"`
	// ReleaseRegistry is the registry of the release image.
	ReleaseRegistry string `json:"release_registry,omitempty"`
	// MirrorRegistryConfigured: some ImageContentSourcePolicy or ImageDigestMirrorSet exists.
	MirrorRegistryConfigured bool `json:"mirror_registry_configured"`
	// RecertImage is reused at the site.
	RecertImage string `json:"recert_image_pull_spec,omitempty"`
	HasProxy    bool   `json:"has_proxy"`
	HasFIPS     bool   `json:"has_fips"`
	// IngressCertificateCN is the router CA's CN (ingress-operator@<unix time>).
	IngressCertificateCN string `json:"ingress_certificate_cn,omitempty"`
	// InfraID is the infrastructure name (Infrastructure cluster status.infrastructureName)
	// and ClusterID ClusterVersion spec.clusterID: a site gets new ones.
	InfraID   string `json:"infra_id,omitempty"`
	ClusterID string `json:"cluster_id,omitempty"`
}

// Check reports what a usable seed identity lacks, all at once.
func (i Info) Check() error {
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"cluster_name", i.ClusterName}, {"base_domain", i.BaseDomain}, {"sno_hostname", i.Hostname},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("seed cluster info has no %s", f.name))
		}
	}
	if len(i.NodeIPs) == 0 {
		errs = append(errs, errors.New("seed cluster info has no node_ips"))
	}
	return errors.Join(errs...)
}

// Read reads and checks the info at path.
func Read(path string) (Info, error) {
	var i Info
	b, err := smallfile.Read(path, maxSize)
	if err != nil {
		return i, fmt.Errorf("reading the seed cluster info: %w", err)
	}
	if err := strictjson.DecodeOpen(b, &i); err != nil {
		return i, fmt.Errorf("seed cluster info %s: %w", path, err)
	}
	if err := i.Check(); err != nil {
		return i, fmt.Errorf("seed cluster info %s: %w", path, err)
	}
	return i, nil
}

// Marshal is the file's content.
func (i Info) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(i, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
