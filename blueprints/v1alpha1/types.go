package v1alpha1

import "github.com/snofactory/snofactory/seeds/contract/oskind"

// APIVersion and Kind identify this schema version in a blueprint file.
const (
	APIVersion = "snofactory.io/v1alpha1"
	Kind       = "Blueprint"
)

// Blueprint describes one seed image: what to install, how to build it in the factory VM,
// and where the result goes. It is the document users write (apiVersion snofactory.io/v1alpha1,
// kind Blueprint).
type Blueprint struct {
	// Schema version of this document; must be snofactory.io/v1alpha1.
	APIVersion string `json:"apiVersion" yaml:"apiVersion" jsonschema:"required,enum=snofactory.io/v1alpha1"`
	// Kind of document; must be Blueprint.
	Kind string `json:"kind" yaml:"kind" jsonschema:"required,enum=Blueprint"`
	// Name and labels of the blueprint.
	Metadata Metadata `json:"metadata" yaml:"metadata" jsonschema:"required"`
	// What to build and how.
	Spec Spec `json:"spec" yaml:"spec" jsonschema:"required"`

	// Resolved holds absolute paths of every file the blueprint references; the loader fills it.
	Resolved ResolvedPaths `json:"-" yaml:"-"`

	dir string
}

// Metadata names a blueprint.
type Metadata struct {
	// Name of the blueprint: a DNS-1123 label (lowercase letters, digits and '-', at most 63
	// characters, starting and ending with a letter or digit). It names builds and cache indexes.
	// Example: du-site-a.
	Name string `json:"name" yaml:"name" jsonschema:"required,minLength=1,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Free-form labels, Kubernetes-style keys ([prefix/]name) and values (at most 63 characters).
	// Example: {site: lab, profile: du}.
	Labels map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// Spec is the body of a blueprint.
type Spec struct {
	// The system the seed carries: a single-node OpenShift cluster or a plain CoreOS-style OS.
	Target Target `json:"target" yaml:"target" jsonschema:"required"`
	// The live ISO the factory VM boots to install the target. Required for coreos; for
	// openshift it may be omitted, and the ISO then comes from the release payload
	// (the coreos-bootimages stream metadata).
	Source *Source `json:"source,omitempty" yaml:"source,omitempty"`
	// OpenShift settings; required when target.type is openshift and not allowed otherwise.
	OpenShift *OpenShift `json:"openshift,omitempty" yaml:"openshift,omitempty"`
	// User Butane fragments, merged in this order after snofactory's own configuration.
	// Each item has exactly one of file or inline.
	Butane []ButaneFragment `json:"butane,omitempty" yaml:"butane,omitempty"`
	// Extra container images to precache on the node, as fully qualified references with a
	// tag or digest. Example: quay.io/prometheus/busybox:latest.
	ExtraImages []string `json:"extraImages,omitempty" yaml:"extraImages,omitempty"`
	// Registry mirrors (ImageContentSourcePolicy/ImageDigestMirrorSet style) used to pull
	// images during the build and configured on the node.
	RegistryMirrors []RegistryMirror `json:"registryMirrors,omitempty" yaml:"registryMirrors,omitempty"`
	// How the live ISO is customized for the factory install, beyond the rendered Ignition
	// config: kernel arguments and NetworkManager keyfiles for the live system.
	LiveISO LiveISO `json:"liveISO,omitempty" yaml:"liveISO,omitempty"`
	// A containers signature policy (policy.json), relative to the blueprint's directory.
	// When set, every image precached must be allowed by it. Default: no policy check.
	SignaturePolicyFile string `json:"signaturePolicyFile,omitempty" yaml:"signaturePolicyFile,omitempty"`
	// The factory VM the install runs in.
	VM VM `json:"vm,omitempty" yaml:"vm,omitempty"`
	// The validation gate that runs before the seed is sealed.
	Validation Validation `json:"validation,omitempty" yaml:"validation,omitempty"`
	// The installed node's disk beyond the OS's own partitions.
	Disk Disk `json:"disk,omitempty" yaml:"disk,omitempty"`
	// How the node is prepared for relocation to its site.
	Relocation Relocation `json:"relocation,omitempty" yaml:"relocation,omitempty"`
	// What the build produces and where it goes.
	Outputs Outputs `json:"outputs,omitempty" yaml:"outputs,omitempty"`
}

// Target says what the seed carries.
type Target struct {
	// openshift: a single-node OpenShift cluster installed from a release image (bootstrap-in-place).
	// coreos: a plain CoreOS-style live-ISO target (appliances, and the conformance OS used by
	// the demo and the tests), configured by Ignition rendered from Butane.
	Type oskind.Kind `json:"type" yaml:"type" jsonschema:"required,enum=openshift,enum=coreos"`
	// The Ignition spec version to emit; a property of the target's OS: the conformance OS runs
	// Debian's Ignition 2.14, which accepts at most 3.3.0; RHCOS for OpenShift 4.14+ takes 3.4.0
	// and 4.19+ 3.5.0. For openshift, empty means the version the release's installer emits.
	// Default: 3.3.0 for coreos, empty for openshift.
	IgnitionVersion string `json:"ignitionVersion,omitempty" yaml:"ignitionVersion,omitempty" jsonschema:"enum=3.3.0,enum=3.4.0,enum=3.5.0"`
}

// Source is the live ISO the factory VM boots. Exactly one of url and path.
//
// A local path must exist when the blueprint is validated, unless generatedBy names the
// command that produces it (for instance an ISO built by the same checkout's Makefile):
// then a missing file is accepted by validation, and the build fails with a message that
// says to run that command first.
type Source struct {
	// HTTP(S) URL of the ISO. Requires sha256. Example: https://example.com/rhcos-live.x86_64.iso.
	URL string `json:"url,omitempty" yaml:"url,omitempty" jsonschema:"pattern=^https?://"`
	// Local path of the ISO, relative to the blueprint's directory. Example: isos/live.iso.
	Path string `json:"path,omitempty" yaml:"path,omitempty"`
	// Expected SHA-256 of the ISO: 64 lowercase hex digits. Required with url; optional with path
	// (the resolve stage records the digest of the file it reads).
	SHA256 string `json:"sha256,omitempty" yaml:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// Command that builds the ISO at path (only with path). When set, a missing file is not a
	// validation error. Example: make conformance-iso.
	GeneratedBy string `json:"generatedBy,omitempty" yaml:"generatedBy,omitempty"`
}

// OpenShift holds the settings of a single-node OpenShift target.
type OpenShift struct {
	// Release image, fully qualified with a tag or digest.
	// Example: quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64.
	ReleaseImage string `json:"releaseImage" yaml:"releaseImage" jsonschema:"required"`
	// Cluster name (DNS-1123 label). Default: metadata.name.
	ClusterName string `json:"clusterName,omitempty" yaml:"clusterName,omitempty" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Base DNS domain of the cluster (DNS-1123 subdomain). Example: edge.example.com.
	BaseDomain string `json:"baseDomain" yaml:"baseDomain" jsonschema:"required"`
	// File holding the pull secret (JSON with an "auths" object), relative to the blueprint's
	// directory. Its content is a secret: never logged, never part of a cache key in clear text.
	PullSecretFile string `json:"pullSecretFile" yaml:"pullSecretFile" jsonschema:"required"`
	// SSH public key for the core user, inline (authorized_keys format). At most one of
	// sshPublicKey and sshPublicKeyFile.
	SSHPublicKey string `json:"sshPublicKey,omitempty" yaml:"sshPublicKey,omitempty"`
	// File holding the SSH public key, relative to the blueprint's directory.
	SSHPublicKeyFile string `json:"sshPublicKeyFile,omitempty" yaml:"sshPublicKeyFile,omitempty"`
	// Pod networks. Default: [{cidr: 10.128.0.0/14, hostPrefix: 23}].
	ClusterNetwork []ClusterNetwork `json:"clusterNetwork,omitempty" yaml:"clusterNetwork,omitempty"`
	// Service networks (CIDRs). Default: [172.30.0.0/16].
	ServiceNetwork []string `json:"serviceNetwork,omitempty" yaml:"serviceNetwork,omitempty"`
	// Machine networks. The seed's cluster is installed on the internal node IP
	// (spec.relocation.nodeIP), which must lie in the first of them of its family (the
	// bootstrap etcd takes its address from that one), and that network must not hold the
	// factory VM's address 10.0.2.15; site addresses are applied at the site. Default: the
	// node IP's subnet, [{cidr: 192.168.127.0/24}].
	MachineNetwork []MachineNetwork `json:"machineNetwork,omitempty" yaml:"machineNetwork,omitempty"`
	// Disk the node installs to, as an absolute device path. Default: /dev/vda (the factory
	// VM's virtio disk).
	InstallDisk string `json:"installDisk,omitempty" yaml:"installDisk,omitempty" jsonschema:"pattern=^/dev/"`
	// Directory of extra manifests (YAML) added to the install, relative to the blueprint's
	// directory. Example: du-profile/extra-manifests.
	ExtraManifests string `json:"extraManifests,omitempty" yaml:"extraManifests,omitempty"`
	// Day-2 operators whose images are precached into the seed.
	Operators []Operator `json:"operators,omitempty" yaml:"operators,omitempty"`
	// Control plane pool; a seed is single-node, so replicas is always 1.
	ControlPlane ControlPlane `json:"controlPlane,omitempty" yaml:"controlPlane,omitempty"`
	// Compute pool; a seed is single-node, so replicas is always 0 (add workers at day 2).
	Compute Compute `json:"compute,omitempty" yaml:"compute,omitempty"`
	// Also emit worker Ignition for day-2 workers. The default ingress controller is then pinned
	// to the master pool, since the infrastructure topology stays SingleReplica. Default: false.
	WorkerIgnition bool `json:"workerIgnition,omitempty" yaml:"workerIgnition,omitempty"`
	// Install the cluster in FIPS mode (install-config fips: true). The seed records it, and
	// serves only sites whose install-config asks for FIPS too: recert cannot change the
	// mode. The conformance OS has no FIPS mode. Default: false.
	FIPS bool `json:"fips,omitempty" yaml:"fips,omitempty"`
	// Cluster-wide proxy of the factory cluster (install-config proxy). A seed built with
	// one records it and serves only sites that give a proxy (recert replaces its URLs with
	// the site's); a seed built without one serves only sites without. Validated as the
	// installer validates it. Default: none.
	Proxy *Proxy `json:"proxy,omitempty" yaml:"proxy,omitempty"`
}

// Proxy is the cluster-wide proxy, the installer's types.Proxy field for field. At least
// one of httpProxy and httpsProxy.
type Proxy struct {
	// URL of the proxy for HTTP requests, scheme http, without credentials (a blueprint is
	// not a secret). Example: http://proxy.factory.example.com:3128.
	HTTPProxy string `json:"httpProxy,omitempty" yaml:"httpProxy,omitempty"`
	// URL of the proxy for HTTPS requests, scheme http or https, without credentials.
	HTTPSProxy string `json:"httpsProxy,omitempty" yaml:"httpsProxy,omitempty"`
	// Comma-separated domains (a leading dot matches subdomains), IP addresses and CIDRs
	// reached without the proxy, or "*" for none. The cluster adds its own networks and
	// names. Example: .factory.example.com,10.0.0.0/8.
	NoProxy string `json:"noProxy,omitempty" yaml:"noProxy,omitempty"`
}

// ClusterNetwork is one pod network.
type ClusterNetwork struct {
	// Network CIDR. Example: 10.128.0.0/14.
	CIDR string `json:"cidr" yaml:"cidr" jsonschema:"required"`
	// Prefix length of the per-node subnet carved from cidr. Example: 23.
	HostPrefix int `json:"hostPrefix" yaml:"hostPrefix" jsonschema:"required,minimum=1,maximum=128"`
}

// MachineNetwork is one network the node's addresses come from.
type MachineNetwork struct {
	// Network CIDR. Example: 192.168.111.0/24.
	CIDR string `json:"cidr" yaml:"cidr" jsonschema:"required"`
}

// ControlPlane is the control plane machine pool.
type ControlPlane struct {
	// Number of control plane nodes: 1. Default: 1.
	Replicas *int `json:"replicas,omitempty" yaml:"replicas,omitempty" jsonschema:"enum=1"`
}

// Compute is the compute machine pool.
type Compute struct {
	// Number of compute nodes at install: 0. Default: 0.
	Replicas int `json:"replicas,omitempty" yaml:"replicas,omitempty" jsonschema:"enum=0"`
}

// Operator is a day-2 operator to precache: a package from a catalog image, or a bundle image.
type Operator struct {
	// Operator package name. Example: ptp-operator.
	Name string `json:"name" yaml:"name" jsonschema:"required,pattern=^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"`
	// Subscription channel (only with catalog). Default: the package's default channel.
	Channel string `json:"channel,omitempty" yaml:"channel,omitempty"`
	// Catalog (index) image the package comes from, fully qualified. Exactly one of catalog
	// and bundle. Example: registry.redhat.io/redhat/redhat-operator-index:v4.16.
	Catalog string `json:"catalog,omitempty" yaml:"catalog,omitempty"`
	// Bundle image, fully qualified, instead of a catalog package.
	Bundle string `json:"bundle,omitempty" yaml:"bundle,omitempty"`
}

// ButaneFragment is one user Butane config. Exactly one of file and inline.
type ButaneFragment struct {
	// Butane file, relative to the blueprint's directory. Example: demo/motd.bu.
	File string `json:"file,omitempty" yaml:"file,omitempty"`
	// Butane config inline, as a YAML block string.
	Inline string `json:"inline,omitempty" yaml:"inline,omitempty"`
}

// RegistryMirror maps a source repository (or registry) to mirrors, as in an
// ImageDigestMirrorSet.
type RegistryMirror struct {
	// Source repository or registry, without tag or digest.
	// Example: quay.io/openshift-release-dev/ocp-release.
	Source string `json:"source" yaml:"source" jsonschema:"required"`
	// Mirrors tried in order, without tag or digest. Example: [registry.depot.example:5000/ocp-release].
	Mirrors []string `json:"mirrors" yaml:"mirrors" jsonschema:"required,minItems=1"`
}

// LiveISO customizes the live ISO the factory VM boots, as coreos-installer iso does.
type LiveISO struct {
	// Kernel arguments of the live system.
	KernelArguments KernelArguments `json:"kernelArguments,omitempty" yaml:"kernelArguments,omitempty"`
	// NetworkManager keyfiles (*.nmconnection) for the live system's first boot, relative to
	// the blueprint's directory. The ISO must support the live-initrd-network feature.
	NetworkKeyfiles []string `json:"networkKeyfiles,omitempty" yaml:"networkKeyfiles,omitempty"`
}

// KernelArguments edits the live ISO's default kernel command line.
type KernelArguments struct {
	// Arguments to append, e.g. [console=ttyS0,115200n8, "rd.neednet=1"].
	Append []string `json:"append,omitempty" yaml:"append,omitempty"`
	// Arguments to delete, as they appear on the command line, e.g. [quiet].
	Delete []string `json:"delete,omitempty" yaml:"delete,omitempty"`
}

// VM is the factory VM the install runs in.
type VM struct {
	// Virtual CPUs. Default: 2 for coreos, 8 for openshift.
	CPUs int `json:"cpus,omitempty" yaml:"cpus,omitempty" jsonschema:"minimum=1,maximum=256"`
	// Memory: a number of MiB, or a size with a unit (KiB, MiB, GiB, TiB; K/M/G/T and KB/MB/GB/TB
	// are read as powers of 1024 too). Default: 1GiB for coreos, 16GiB for openshift. Minimum 256MiB.
	Memory Size `json:"memory,omitempty" yaml:"memory,omitempty"`
	// Size of the install disk: a number of MiB or a size with a unit. Default: 8GiB for coreos,
	// 120GiB for openshift. Minimum 1GiB.
	DiskSize Size `json:"diskSize,omitempty" yaml:"diskSize,omitempty"`
	// Firmware: bios or uefi. Default: bios.
	Firmware string `json:"firmware,omitempty" yaml:"firmware,omitempty" jsonschema:"enum=bios,enum=uefi"`
	// Accelerator: auto (KVM when it works, else TCG with a warning and scaled timeouts),
	// kvm (fail without KVM), or tcg. Default: auto.
	Accelerator string `json:"accelerator,omitempty" yaml:"accelerator,omitempty" jsonschema:"enum=auto,enum=kvm,enum=tcg"`
	// Per-phase timeouts, as Go durations with an optional d (days) unit, e.g. 90s, 20m, 1h30m.
	// They are nominal for KVM; the install stage scales them under TCG.
	Timeouts Timeouts `json:"timeouts,omitempty" yaml:"timeouts,omitempty"`
}

// Timeouts bound each phase of the factory install.
type Timeouts struct {
	// From VM start to the live system reporting in. Default: 10m.
	Boot Duration `json:"boot,omitempty" yaml:"boot,omitempty"`
	// From the live system to the installed OS booted from disk. Default: 30m.
	Install Duration `json:"install,omitempty" yaml:"install,omitempty"`
	// From first boot of the installed OS to a settled cluster (openshift only). Default: 2h.
	Cluster Duration `json:"cluster,omitempty" yaml:"cluster,omitempty"`
	// Clean shutdown before sealing. Default: 5m.
	Shutdown Duration `json:"shutdown,omitempty" yaml:"shutdown,omitempty"`
}

// Validation configures the gate before sealing.
type Validation struct {
	// Ids of checks to skip (lowercase letters, digits, '.', '-'). Skipped checks are recorded
	// in the report as skipped. Example: [certs.kubelet-client].
	Skip []string `json:"skip,omitempty" yaml:"skip,omitempty" jsonschema:"uniqueItems=true,pattern=^[a-z0-9][a-z0-9.-]*$"`
	// Why each skipped check is skipped, by check id; the report shows the reason beside the
	// skipped check. Every key must be listed in skip. Example: {certs.kubelet-client: re-signed by recert at the site}.
	SkipReasons map[string]string `json:"skipReasons,omitempty" yaml:"skipReasons,omitempty"`
}

// Relocation prepares the node to be moved to its site and reconfigured there.
type Relocation struct {
	// Internal node IP with prefix length (CIDR notation), added to br-ex and used as the
	// kubelet/CRI-O node IP so the node keeps its identity when the site network changes.
	// It must lie in a machine network and outside the cluster and service networks.
	// Default: 192.168.127.10/24 (a private range unlikely to collide with site networks).
	NodeIP string `json:"nodeIP,omitempty" yaml:"nodeIP,omitempty"`
	// How long the cluster's kubelet and serving certificates must stay valid when validate
	// checks them (a warning when they do not). A seed's shelf life is not bounded by it: the
	// seal's recert ends every certificate's life and the site's recert starts it again on the
	// site's first boot. Default: 24h. Minimum: 1h; maximum: 30d, the longest an OpenShift
	// signer issues.
	KubeletCertValidity Duration `json:"kubeletCertValidity,omitempty" yaml:"kubeletCertValidity,omitempty"`
	// How long a sealed seed waits at the site for its site-config medium (volume label
	// SNOSITE) before it reports the failure and leaves the seed as it was, to be booted again
	// with the medium. Default: 10m. Minimum: 10s; maximum: 24h.
	SiteConfigTimeout Duration `json:"siteConfigTimeout,omitempty" yaml:"siteConfigTimeout,omitempty"`
	// Image of recert, which an OpenShift seed's reconfiguration runs at the site to rename
	// the cluster, change its IP and hostname and renew its certificates. Pinned in the lock
	// and precached, so the site needs no registry. Default (openshift targets):
	// quay.io/edge-infrastructure/recert:v0.
	RecertImage string `json:"recertImage,omitempty" yaml:"recertImage,omitempty"`
	// Public keys (PEM PREFIX.pub files from `snofactory keys generate`, or cosign.pub),
	// relative to the blueprint's directory, that a site-config medium must be signed by
	// (`snofactory site-config create --sign-by`). The seed carries them; its reconfiguration
	// refuses an unsigned medium, a changed one, or one signed by another key, and waits for
	// a signed one. Default: none: the seed accepts unsigned media. Example: [keys/sites.pub].
	SiteConfigKeys []string `json:"siteConfigKeys,omitempty" yaml:"siteConfigKeys,omitempty" jsonschema:"uniqueItems=true"`
	// An age identity file (AGE-SECRET-KEY-1..., from age-keygen), relative to the
	// blueprint's directory, with which the seed opens the secrets a site-config medium
	// carries sealed (`snofactory site-config create --seal-to RECIPIENT`, RECIPIENT being
	// what age-keygen -y prints for it). A secret: the seal places it on the node (0600)
	// from the build's secrets; no log, cache key, install config or OpenShift manifest
	// holds it. Example: keys/site-identity.txt.
	SiteConfigIdentity string `json:"siteConfigIdentity,omitempty" yaml:"siteConfigIdentity,omitempty"`
}

// Outputs says what the build produces and where it goes.
type Outputs struct {
	// Disk image formats of the seed: chunked (content-defined chunks, moved as deltas),
	// qcow2 and/or raw (zstd). Default: [chunked].
	Formats []string `json:"formats,omitempty" yaml:"formats,omitempty" jsonschema:"uniqueItems=true,enum=chunked,enum=qcow2,enum=raw"`
	// Compression of the seed disk: none, zstd, xz or gzip. Default: zstd.
	Compression string `json:"compression,omitempty" yaml:"compression,omitempty" jsonschema:"enum=none,enum=zstd,enum=xz,enum=gzip"`
	// OCI reference (fully qualified, with a tag) to push the seed to as an OCI artifact.
	// Example: registry.depot.example:5000/seeds/du:4.16.12.
	Push string `json:"push,omitempty" yaml:"push,omitempty"`
	// Directory of an OCI image layout to write the seed into (for air-gapped transfer),
	// relative to the blueprint's directory. It need not exist.
	OCILayout string `json:"ociLayout,omitempty" yaml:"ociLayout,omitempty"`
	// Keep the build-time pull secret on the seed's disk. Default: false: the seal stage
	// removes it and the site config supplies the site's own.
	KeepPullSecret bool `json:"keepPullSecret,omitempty" yaml:"keepPullSecret,omitempty"`
	// Public keys the cluster's credentials (kubeconfig, kubeadmin password) are encrypted to,
	// shipped beside the seed as credentials.age: age X25519 recipients (age1...) or SSH public
	// keys (ssh-ed25519, ssh-rsa). Without recipients an OpenShift seed ships no credentials.
	// Example: [age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p].
	CredentialsRecipients []string `json:"credentialsRecipients,omitempty" yaml:"credentialsRecipients,omitempty"`
	// Signs the pushed seed, as cosign and podman expect: a signature of the seed, and its
	// SLSA provenance and SBOM as signed attestations. Requires push. `snofactory build
	// --sign-by` gives a key for one build instead.
	Signing *Signing `json:"signing,omitempty" yaml:"signing,omitempty"`
}

// Signing is the key a published seed is signed with.
type Signing struct {
	// The encrypted sigstore private key (PREFIX.key from `snofactory keys generate`, or a
	// cosign.key), relative to the blueprint's directory. Example: keys/depot.key.
	Key string `json:"key" yaml:"key" jsonschema:"required,minLength=1"`
	// A file whose first line is the key's passphrase, relative to the blueprint's
	// directory. Default: the environment variable SNOFACTORY_KEY_PASSPHRASE. The
	// passphrase itself never goes in a blueprint.
	PassphraseFile string `json:"passphraseFile,omitempty" yaml:"passphraseFile,omitempty"`
}

// ResolvedPaths are absolute forms of the paths a blueprint references. Empty when the
// blueprint does not reference that file.
type ResolvedPaths struct {
	ISO              string
	PullSecretFile   string
	SSHPublicKeyFile string
	ExtraManifests   string
	// One entry per spec.butane item; empty for inline fragments.
	Butane []string
	// One entry per spec.liveISO.networkKeyfiles item.
	NetworkKeyfiles     []string
	SignaturePolicyFile string
	OCILayout           string
	// One entry per spec.relocation.siteConfigKeys item.
	SiteConfigKeys []string
	// SiteConfigIdentity is spec.relocation.siteConfigIdentity's file.
	SiteConfigIdentity string
	// SigningKey and SigningPassphraseFile are spec.outputs.signing's files.
	SigningKey            string
	SigningPassphraseFile string
}

// Inputs are the files and directories the blueprint reads (its outputs left out); empty
// entries are dropped.
func (r ResolvedPaths) Inputs() []string {
	var in []string
	for _, p := range append([]string{r.ISO, r.PullSecretFile, r.SSHPublicKeyFile, r.ExtraManifests, r.SignaturePolicyFile, r.SiteConfigIdentity},
		append(append(r.Butane, r.NetworkKeyfiles...), r.SiteConfigKeys...)...) {
		if p != "" {
			in = append(in, p)
		}
	}
	return in
}
