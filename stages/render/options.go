package render

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// Name is the stage's name in a build graph.
const Name = handoff.StageRender

// Options is exactly what render reads. Its canonical JSON is part of the stage's cache key,
// so it holds labels and values, never host paths or secrets: file contents are keyed through
// HostFiles (which goes to pipeline.Stage.Files and is not serialized) and the pull secret and
// SSH key come from the secrets channel.
type Options struct {
	Target oskind.Kind `json:"target"`
	// IgnitionVersion is the Ignition spec the coreos target's config is written in
	// ("3.2.0" … "3.5.0"); the conformance OS's Debian ignition accepts at most 3.3.0.
	// The openshift target takes the installer's version for config.ign and the Butane
	// openshift variant's for MachineConfigs, so it ignores this field.
	IgnitionVersion string `json:"ignitionVersion,omitempty"`
	// OpenShift holds the cluster for oskind.OpenShift.
	OpenShift *OpenShift `json:"openshift,omitempty"`
	// Relocation, when set, adds the relocatable-seed MachineConfigs (openshift only).
	Relocation *Relocation `json:"relocation,omitempty"`
	// Fragments are the user's Butane configs, applied in order.
	Fragments []Fragment `json:"fragments,omitempty"`
	// SiteKeys are labels (resolved through HostFiles, contents keyed like a fragment's) of
	// the public keys the seed's site-config media must be signed by. The node gets each in
	// siteconfig.NodeKeysDir.
	SiteKeys []string `json:"siteKeys,omitempty"`
	// WorkerIgnition also emits ignition/worker.ign for day-2 workers.
	WorkerIgnition bool `json:"workerIgnition,omitempty"`
	// SSHKey says the "sshKey" secret is configured and must be used.
	SSHKey bool `json:"sshKey,omitempty"`
	// KeepSecrets writes the real pull secret and SSH key into manifests/install-config.yaml
	// instead of redacted ones. Off by default: outputs are cached and may be shipped.
	KeepSecrets bool `json:"keepSecrets,omitempty"`
	// FromResolve makes the resolve stage a dependency: openshift-install is the one it
	// extracted from the release, and the release is pinned by the digest its lock holds.
	// Outside the engine (snofactory render) there is no resolve output: InstallerPath,
	// else PATH, and the options' version.
	FromResolve bool `json:"fromResolve,omitempty"`

	// InstallerPath is a host path of openshift-install. Not serialized: its content digest
	// is keyed through Stage.Files under the label "tools/openshift-install".
	InstallerPath string `json:"-"`
	// HostFiles maps every Fragment.File and SiteKeys label to its path on this host. Not serialized:
	// contents are keyed through Stage.Files.
	HostFiles map[string]string `json:"-"`
}

// OpenShift is the cluster an openshift render installs.
type OpenShift struct {
	// Version is the release's x.y or x.y.z (e.g. "4.16" or "4.16.3"); it picks the Butane
	// openshift variant (x.y.0) and so the MachineConfigs' Ignition spec. Empty means the
	// release.version of the resolve stage's lock (allowed only with FromResolve).
	Version string `json:"version"`
	// ClusterName and BaseDomain make the cluster domain <ClusterName>.<BaseDomain>.
	ClusterName string `json:"clusterName"`
	BaseDomain  string `json:"baseDomain"`
	// InstallationDisk is where bootstrap-in-place writes the OS, e.g. "/dev/vda".
	InstallationDisk string `json:"installationDisk"`
	// MachineNetwork and ServiceNetwork are CIDRs, ClusterNetwork pod networks each with its
	// own host prefix (a dual-stack cluster has an IPv4 /23 and an IPv6 /64); empty means the
	// installer's defaults (10.0.0.0/16, 10.128.0.0/14 /23, 172.30.0.0/16).
	MachineNetwork []string         `json:"machineNetwork,omitempty"`
	ClusterNetwork []ClusterNetwork `json:"clusterNetwork,omitempty"`
	ServiceNetwork []string         `json:"serviceNetwork,omitempty"`
	// Mirrors become install-config imageDigestSources.
	Mirrors []Mirror `json:"mirrors,omitempty"`
	// AdditionalTrustBundle is PEM text (e.g. the mirror registry's CA).
	AdditionalTrustBundle string `json:"additionalTrustBundle,omitempty"`
	// ReleaseImage, when set, is the release the installer installs; it is passed as
	// OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE. When the resolve stage (FromResolve) has a
	// lock.json, its release (repository@digest) is passed instead, so render installs
	// exactly what was resolved even if the tag has moved since.
	ReleaseImage string `json:"releaseImage,omitempty"`
	// FIPS installs the cluster in FIPS mode (install-config fips: true).
	FIPS bool `json:"fips,omitempty"`
	// ContainerStorage, when set, is a separate /var/lib/containers partition on
	// InstallationDisk.
	ContainerStorage *ContainerStorage `json:"containerStorage,omitempty"`
	// Proxy is the cluster-wide proxy (install-config proxy); nil: none.
	Proxy *Proxy `json:"proxy,omitempty"`
}

// Proxy is the installer's types.Proxy (pkg/types/installconfig.go): the factory cluster's
// proxy, which recert replaces with the site's.
type Proxy struct {
	HTTPProxy  string `yaml:"httpProxy,omitempty" json:"httpProxy,omitempty"`
	HTTPSProxy string `yaml:"httpsProxy,omitempty" json:"httpsProxy,omitempty"`
	NoProxy    string `yaml:"noProxy,omitempty" json:"noProxy,omitempty"`
}

// ClusterNetwork is one pod network: each node gets a /HostPrefix subnet of CIDR.
type ClusterNetwork struct {
	CIDR string `json:"cidr"`
	// HostPrefix 0 means the installer's default for the address family (23 for IPv4, 64 for IPv6).
	HostPrefix int `json:"hostPrefix,omitempty"`
}

// hostPrefix is n's host prefix, defaulted by address family.
func (n ClusterNetwork) hostPrefix() int {
	if n.HostPrefix != 0 {
		return n.HostPrefix
	}
	if p, err := netip.ParsePrefix(n.CIDR); err == nil && p.Addr().Is6() {
		return defaultHostPrefix6
	}
	return defaultHostPrefix
}

// Mirror is one imageDigestSources entry.
type Mirror struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// Relocation configures the relocatable-seed MachineConfigs.
type Relocation struct {
	// InternalIP is the stable node address added to br-ex, as a prefix, e.g. "192.168.127.10/24".
	// The cluster is installed on it so changing the site address does not touch the cluster.
	InternalIP string `json:"internalIP"`
	// ShipmentWindow is how long the sealed seed may sit unpowered before reconfiguration;
	// the kubelet client certificate must stay valid at least that long (default 720h, the
	// 30 days of upstream's kubelet client certificates).
	ShipmentWindow string `json:"shipmentWindow,omitempty"`
}

// Fragment is one Butane config: a file (by label) or inline text.
type Fragment struct {
	// File is a label (the path relative to the blueprint) resolved through HostFiles.
	File string `json:"file,omitempty"`
	// Inline is the Butane text itself.
	Inline string `json:"inline,omitempty"`
}

// name is how errors and render.json refer to the fragment.
func (f Fragment) name(i int) string {
	if f.File != "" {
		return f.File
	}
	return fmt.Sprintf("fragments[%d] (inline)", i)
}

const defaultShipmentWindow = 720 * time.Hour

// validate checks what only render knows about its Options: that the graph filled them in
// consistently (a target render has, the settings that target reads, where openshift-install
// and each fragment come from). The values a user writes (names, networks, disks, addresses,
// Butane sources) are checked once, by blueprint validation, which reports each problem at
// its place in the file; the steps that use a value still fail plainly if it is unusable.
func (o Options) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch o.Target {
	case oskind.CoreOS:
		if o.Relocation != nil {
			bad("relocation: relocation MachineConfigs need the %s target", oskind.OpenShift)
		}
		if o.WorkerIgnition {
			bad("workerIgnition: day-2 worker configs need the %s target", oskind.OpenShift)
		}
	case oskind.OpenShift:
		if o.OpenShift == nil {
			bad("openshift: required for the %s target", oskind.OpenShift)
		}
	default:
		bad("target %q: want %q or %q", o.Target, oskind.OpenShift, oskind.CoreOS)
	}
	for i, f := range o.Fragments {
		if f.File != "" && o.HostFiles[f.File] == "" {
			bad("fragments[%d]: file %q has no host path", i, f.File)
		}
	}
	for i, k := range o.SiteKeys {
		if o.HostFiles[k] == "" {
			bad("siteKeys[%d]: %q has no host path", i, k)
		}
	}
	return errors.Join(errs...)
}

func (r Relocation) window() (time.Duration, error) {
	if r.ShipmentWindow == "" {
		return defaultShipmentWindow, nil
	}
	d, err := time.ParseDuration(r.ShipmentWindow)
	if err == nil && d <= 0 {
		err = errors.New("must be positive")
	}
	return d, err
}
