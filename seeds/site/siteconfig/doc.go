// Package siteconfig is the site config: the small document a field technician gives a seed
// at its edge site (hostname, network, DNS, NTP, cluster name and domain, pull secret,
// registry mirrors, SSH keys, extra manifests), and the medium that carries it, an ISO 9660
// image with the fixed volume label VolumeLabel that the seed's reconfiguration hook looks
// for. Load reads a site config as strictly as a blueprint (every problem at once, as
// FILE:LINE:COL: PATH: MESSAGE with a hint); Write puts its self-contained form (referenced
// files inlined, see Normalized) on a medium and ReadMedium reads one back and validates it
// again.
//
// spec.network is an nmstate document: ethernet, bond (link-aggregation) and vlan
// interfaces with state, mac-address, mtu and ipv4/ipv6 blocks (enabled, dhcp, autoconf,
// static address lists); routes.config entries with destination, next-hop-address,
// next-hop-interface, metric and table-id; dns-resolver.config server and search. Validation
// (network.go, bond.go, topology.go) refuses what nmstate, or the kernel under it, would
// refuse when the hook applies the document, and what the hook cannot apply; each rule
// names its source. Linux and OVS bridges, other interface types, route rules, ethtool,
// 802.1x and per-port bond settings are refused with "not supported by the reconfiguration
// hook in this version" rather than silently dropped. DNS may be given as spec.dns or as the
// nmstate dns-resolver, not both with different values (EffectiveDNS).
//
// The image-based installer's inputs load too (ibiconfig.go): an ImageBasedConfig file
// with the install-config.yaml and extra-manifests/ beside it becomes a site config, each
// problem reported at its place in the file that holds it; and ReadMedium reads that
// installer's cluster-config medium (imagebased.go).
//
// A medium can be signed (WriteMedium with a signer): SignatureFileName beside the site
// config holds a cosign sign-blob signature of ConfigFileName's bytes, which are the whole
// of what the hook applies, since Normalized inlines every referenced file. A seed that
// carries site keys (NodeKeysDir) checks it (OpenMedium, Verify) before it parses anything
// on the medium.
//
// The pull secret is the site's own and travels on the medium, which Write therefore
// creates with mode 0600; no message of this package quotes it.
package siteconfig
