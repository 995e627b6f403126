package siteconfig

import (
	"errors"
	"fmt"
	"path/filepath"
)

// APIVersion and Kind identify this schema version in a site config file; a seed's manifest
// records the APIVersion its reconfiguration hook understands.
const (
	APIVersion = "snofactory.io/v1alpha1"
	Kind       = "SiteConfig"
)

// SiteConfig is what a seed needs to become one site's node.
type SiteConfig struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	Spec       Spec     `yaml:"spec"`

	dir string // where file references resolve; "" for a self-contained config
}

// Metadata names a site config.
type Metadata struct {
	// Name: a DNS-1123 label, e.g. store-0042.
	Name string `yaml:"name"`
}

// Spec is the body of a site config.
type Spec struct {
	// The node's host name: an RFC 1123 host name (dot-separated labels).
	Hostname string `yaml:"hostname"`
	// OpenShift only, optional: the cluster name and base domain the node is renamed to.
	ClusterName string `yaml:"clusterName,omitempty"`
	BaseDomain  string `yaml:"baseDomain,omitempty"`
	// The node's network as nmstate YAML (the supported subset; see the package doc).
	Network *Network `yaml:"network,omitempty"`
	DNS     *DNS     `yaml:"dns,omitempty"`
	NTP     *NTP     `yaml:"ntp,omitempty"`
	// PullSecretFile names the site's pull secret (JSON with auths), relative to the site
	// config. Load reads it into PullSecret; the self-contained form carries PullSecret only.
	PullSecretFile string `yaml:"pullSecretFile,omitempty"`
	PullSecret     string `yaml:"pullSecret,omitempty"`
	// AdditionalTrustBundle is PEM certificates the node and the cluster trust besides the
	// system's (install-config's additionalTrustBundle; OpenShift only): recert's
	// user_ca_bundle puts it in the cluster, and the hook trusts it on the node first.
	AdditionalTrustBundle string `yaml:"additionalTrustBundle,omitempty"`
	// AdditionalTrustBundlePolicy is install-config's: Proxyonly (the default) makes the
	// bundle the proxy's trusted CA when there is a proxy, Always whether or not.
	AdditionalTrustBundlePolicy string `yaml:"additionalTrustBundlePolicy,omitempty"`
	// Proxy is the cluster-wide proxy (OpenShift only), applied by recert as lifecycle-agent
	// does; the seed must have been built with a proxy too (see HasProxy).
	Proxy *Proxy `yaml:"proxy,omitempty"`
	// NodeLabels are labels the hook puts on the node once the API answers (OpenShift only),
	// as lifecycle-agent's post-pivot does with an ImageBasedConfig's nodeLabels.
	NodeLabels map[string]string `yaml:"nodeLabels,omitempty"`
	// FIPS: the site's cluster must run in FIPS mode (install-config's fips); only a seed
	// built with fips: true serves it, and such a seed serves only such sites.
	FIPS bool `yaml:"fips,omitempty"`
	// SeedVersion is the OpenShift release the site expects its seed to carry, as the
	// image-based installer's image-based-installation-config.yaml seedVersion; empty: any.
	SeedVersion string `yaml:"seedVersion,omitempty"`
	// Registry mirrors, rendered as an ImageDigestMirrorSet (see ImageDigestMirrorSet).
	RegistryMirrors []RegistryMirror `yaml:"registryMirrors,omitempty"`
	// SSH public keys in authorized_keys format, one per item.
	SSHAuthorizedKeys []string `yaml:"sshAuthorizedKeys,omitempty"`
	// ExtraManifests are files or directories (their *.yaml, *.yml and *.json files) of
	// Kubernetes objects to apply, relative to the site config. Load reads them into
	// Manifests; the self-contained form carries Manifests only.
	ExtraManifests []string   `yaml:"extraManifests,omitempty"`
	Manifests      []Manifest `yaml:"manifests,omitempty"`
	// OpenShift only. KubeadminPasswordHash is the bcrypt hash of the site's kubeadmin
	// password; without one the hook deletes the kubeadmin secret, so the factory's
	// password never works at a site.
	KubeadminPasswordHash string `yaml:"kubeadminPasswordHash,omitempty"`
	// ClusterID (a UUID, ClusterVersion spec.clusterID) and InfraID (the infrastructure
	// name) are the site cluster's own; the hook generates them when they are not given.
	ClusterID string `yaml:"clusterID,omitempty"`
	InfraID   string `yaml:"infraID,omitempty"`
	// KubeconfigCrypto are keys recert keeps (use_key, use_cert), so an admin kubeconfig
	// made for the site before the node boots works after recert.
	KubeconfigCrypto *KubeconfigCrypto `yaml:"kubeconfigCrypto,omitempty"`
	// SealedSecrets carries pullSecret, kubeadminPasswordHash and kubeconfigCrypto
	// age-encrypted (ASCII armor) to the seed's identity instead of in clear, so a lost
	// medium does not leak them (site-config create --seal-to; EncryptSecrets, DecryptSecrets).
	SealedSecrets string `yaml:"sealedSecrets,omitempty"`
	// Binding ties the medium to one seed and one machine; the hook refuses it anywhere
	// else. It is part of what a signature covers, so a signed medium made for one site
	// cannot be replayed at another.
	Binding *Binding `yaml:"binding,omitempty"`
}

// Binding names the seed and the machine a site config is for; an empty field binds
// nothing.
type Binding struct {
	// Seed is the seed's name: its blueprint's metadata.name, seed.json's name.
	Seed string `yaml:"seed,omitempty"`
	// MachineSerial is the server's serial number as its firmware reports it (the SMBIOS
	// system serial: dmidecode -s system-serial-number, /sys/class/dmi/id/product_serial),
	// usually printed on the chassis label.
	MachineSerial string `yaml:"machineSerial,omitempty"`
}

// MaxMachineSerial bounds a serial number: SMBIOS strings are short.
const MaxMachineSerial = 64

// ErrBoundElsewhere is what a CheckBinding refusal wraps.
var ErrBoundElsewhere = errors.New("the site config is bound to another seed or machine")

type bindingError struct{ msg string }

func (e *bindingError) Error() string        { return e.msg }
func (e *bindingError) Is(target error) bool { return target == ErrBoundElsewhere }

// CheckBinding says why the medium must not be applied to the seed named seedName on the
// machine whose serial is serial (nil: it may). A serial that could not be read ("") does
// not match a binding that names one.
func (sc *SiteConfig) CheckBinding(seedName, serial string) error {
	b := sc.Spec.Binding
	if b == nil {
		return nil
	}
	switch {
	case b.Seed == "" || b.Seed == seedName:
	case seedName == "":
		return &bindingError{fmt.Sprintf("it was made for seed %q, and this seed records no name (it was sealed by an older snofactory)", b.Seed)}
	default:
		return &bindingError{fmt.Sprintf("it was made for seed %q, and this is seed %q", b.Seed, seedName)}
	}
	if b.MachineSerial != "" && b.MachineSerial != serial {
		if serial == "" {
			return &bindingError{fmt.Sprintf("it was made for the machine with serial number %q, and this machine reports none", b.MachineSerial)}
		}
		return &bindingError{fmt.Sprintf("it was made for the machine with serial number %q, and this machine's is %q", b.MachineSerial, serial)}
	}
	return nil
}

// KubeconfigCrypto is the crypto the image-based installer retains for a site (its
// SeedReconfiguration KubeconfigCryptoRetention), PEM-encoded.
type KubeconfigCrypto struct {
	LoadBalancerSignerKey   string `yaml:"loadBalancerSignerKey"`
	LocalhostSignerKey      string `yaml:"localhostSignerKey"`
	ServiceNetworkSignerKey string `yaml:"serviceNetworkSignerKey"`
	AdminClientCACert       string `yaml:"adminClientCACert"`
	IngressCAKey            string `yaml:"ingressCAKey,omitempty"`
}

// Network is the supported subset of an nmstate network state.
type Network struct {
	Interfaces  []Interface  `yaml:"interfaces,omitempty"`
	Routes      *Routes      `yaml:"routes,omitempty"`
	DNSResolver *DNSResolver `yaml:"dns-resolver,omitempty"`
}

// Interface is an nmstate interface of type ethernet, bond or vlan.
type Interface struct {
	Name  string `yaml:"name"`
	Type  string `yaml:"type"`
	State string `yaml:"state,omitempty"` // up (default) or down
	// MACAddress, when set, is the hardware address the interface must have: nmstate
	// binds the connection to it; on the conformance OS the hook checks it before any
	// change, so a site config for another box changes nothing.
	MACAddress string    `yaml:"mac-address,omitempty"`
	MTU        *int      `yaml:"mtu,omitempty"`
	IPv4       *IPConfig `yaml:"ipv4,omitempty"`
	IPv6       *IPConfig `yaml:"ipv6,omitempty"`
	// LinkAggregation is a bond's settings (type bond only), VLAN a VLAN's (type vlan only).
	LinkAggregation *Bond `yaml:"link-aggregation,omitempty"`
	VLAN            *VLAN `yaml:"vlan,omitempty"`
}

// IPConfig is an interface's ipv4 or ipv6 block.
type IPConfig struct {
	Enabled *bool `yaml:"enabled,omitempty"` // default true when the block is given
	// DHCP and Autoconf are kept as given: nmstate takes a setting left out from the
	// interface's current state (rust/src/lib/ip.rs InterfaceIpv4::merge_ip), so an
	// explicit false must reach nmstatectl. Autoconf is IPv6 router advertisement (SLAAC);
	// nmstate refuses it under ipv4.
	DHCP     *bool     `yaml:"dhcp,omitempty"`
	Autoconf *bool     `yaml:"autoconf,omitempty"`
	Address  []Address `yaml:"address,omitempty"`
}

// IsDHCP and IsAutoconf report the flags, false when unset.
func (c *IPConfig) IsDHCP() bool     { return c != nil && c.DHCP != nil && *c.DHCP }
func (c *IPConfig) IsAutoconf() bool { return c != nil && c.Autoconf != nil && *c.Autoconf }

// IsEnabled reports the block's enabled flag, true when unset.
func (c *IPConfig) IsEnabled() bool { return c != nil && (c.Enabled == nil || *c.Enabled) }

// Address is a static address.
type Address struct {
	IP           string `yaml:"ip"`
	PrefixLength int    `yaml:"prefix-length"`
}

// Routes is nmstate's routes section.
type Routes struct {
	Config []Route `yaml:"config,omitempty"`
}

// Route is a static route; destination 0.0.0.0/0 or ::/0 is a default route.
type Route struct {
	Destination      string `yaml:"destination"`
	NextHopAddress   string `yaml:"next-hop-address,omitempty"`
	NextHopInterface string `yaml:"next-hop-interface,omitempty"`
	Metric           *int   `yaml:"metric,omitempty"`
	TableID          *int   `yaml:"table-id,omitempty"`
}

// DNSResolver is nmstate's dns-resolver section.
type DNSResolver struct {
	Config DNSResolverConfig `yaml:"config"`
}

// DNSResolverConfig lists name servers and search domains.
type DNSResolverConfig struct {
	Server []string `yaml:"server,omitempty"`
	Search []string `yaml:"search,omitempty"`
}

// DNS lists name servers (IP addresses) and search domains.
type DNS struct {
	Servers []string `yaml:"servers,omitempty"`
	Search  []string `yaml:"search,omitempty"`
}

// NTP lists time servers (host names or IP addresses).
type NTP struct {
	Servers []string `yaml:"servers,omitempty"`
}

// RegistryMirror maps a source repository (or registry) to mirrors tried in order.
type RegistryMirror struct {
	Source  string   `yaml:"source"`
	Mirrors []string `yaml:"mirrors"`
}

// Manifest is one extra manifest file, by its base name (unique in a site config).
type Manifest struct {
	Name    string `yaml:"name"`
	Content string `yaml:"content"`
}

// EffectiveDNS is the DNS the node gets: spec.dns, else the nmstate dns-resolver. Validation
// refuses the two set to different values.
func (sc *SiteConfig) EffectiveDNS() DNS {
	if d := sc.Spec.DNS; d != nil && (len(d.Servers) > 0 || len(d.Search) > 0) {
		return *d
	}
	if n := sc.Spec.Network; n != nil && n.DNSResolver != nil {
		return DNS{Servers: n.DNSResolver.Config.Server, Search: n.DNSResolver.Config.Search}
	}
	return DNS{}
}

// Dir is the directory file references resolve against; "" for a self-contained config
// (one read from a medium).
func (sc *SiteConfig) Dir() string { return sc.dir }

// Inputs are the files the site config names (its pull secret, its extra manifests),
// relative to its directory: what a command that reads it must never write.
func (sc *SiteConfig) Inputs() []string {
	var in []string
	for _, f := range append([]string{sc.Spec.PullSecretFile}, sc.Spec.ExtraManifests...) {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(sc.dir, f)
		}
		in = append(in, f)
	}
	return in
}
