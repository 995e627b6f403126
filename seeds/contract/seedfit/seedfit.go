// Package seedfit is the seed's record of what a site must match: what lifecycle-agent's
// seed cluster info carries for its compatibility checks (lca-cli/seedclusterinfo/
// seedclusterinfo.go SeedClusterInfo: has_proxy, has_fips, machine_networks,
// container_storage_mountpoint_target, seed_cluster_ocp_version, release_registry). The
// seal fills it from what the build rendered; the seed manifest and the node's sealed
// request both carry it, so seeds/site/fit can check a site before anything changes.
package seedfit

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Version is the record format this package writes. It reads Version1 too: there proxy
// is always given, false for the conformance OS, which has no cluster-wide proxy; from
// version 2 it is absent for a seed that is no cluster.
const (
	Version  = 2
	Version1 = 1
)

// IP families, as the record names them.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// Record is what a site must match for the seed to serve it.
type Record struct {
	// Version of this record; readers refuse versions they do not know.
	Version int `json:"version" jsonschema:"required,enum=1,enum=2"`
	// Proxy: the factory cluster was installed with a cluster-wide proxy (has_proxy);
	// absent for the conformance OS, which has none to compare (see Version).
	Proxy *bool `json:"proxy,omitempty"`
	// IPFamilies of the factory's machine network, IPv4 first: one for a single-stack
	// cluster, two for dual-stack; none recorded for the conformance OS, which any site fits.
	IPFamilies []string `json:"ipFamilies,omitempty" jsonschema:"maxItems=2"`
	// FIPS: the factory cluster was installed in FIPS mode (has_fips).
	FIPS bool `json:"fips"`
	// ContainerStorageLabel is the partition label of a separate /var/lib/containers
	// (container_storage_mountpoint_target); empty: none.
	ContainerStorageLabel string `json:"containerStorageLabel,omitempty"`
	// ReleaseVersion is the OpenShift release installed (seed_cluster_ocp_version).
	ReleaseVersion string `json:"releaseVersion,omitempty"`
	// ReleaseRegistry is the registry of the release image (release_registry).
	ReleaseRegistry string `json:"releaseRegistry,omitempty"`
}

// Families returns the IP families of cidrs, IPv4 first, each once.
func Families(cidrs []string) ([]string, error) {
	var v4, v6 bool
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("machine network %q: %w", c, err)
		}
		if p.Addr().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	return FamilyList(v4, v6), nil
}

// FamilyList lists the families present, IPv4 first.
func FamilyList(v4, v6 bool) []string {
	var f []string
	if v4 {
		f = append(f, IPv4)
	}
	if v6 {
		f = append(f, IPv6)
	}
	return f
}

// Describe names a family list as a person reads it: "single-stack IPv4", "dual-stack
// (IPv4+IPv6)".
func Describe(families []string) string {
	switch {
	case len(families) == 0:
		return "without an IP family"
	case len(families) == 2:
		return "dual-stack (IPv4+IPv6)"
	case families[0] == IPv6:
		return "single-stack IPv6"
	default:
		return "single-stack IPv4"
	}
}

// Validate reports every problem of r at once.
func (r *Record) Validate() error {
	var errs []error
	if r.Version != Version && r.Version != Version1 {
		errs = append(errs, fmt.Errorf("version: %d is not %d or %d", r.Version, Version1, Version))
	}
	for i, f := range r.IPFamilies {
		if f != IPv4 && f != IPv6 || slices.Index(r.IPFamilies, f) != i {
			errs = append(errs, fmt.Errorf("ipFamilies[%d]: %q is not %s or %s, or is listed twice", i, f, IPv4, IPv6))
		}
	}
	if len(r.IPFamilies) == 2 && r.IPFamilies[0] != IPv4 {
		errs = append(errs, errors.New("ipFamilies: IPv4 comes first"))
	}
	return errors.Join(errs...)
}

// HasProxy is the seed's cluster-wide proxy and whether a site's is compared with it at
// all: not for a seed that is no cluster (proxy absent from version 2 on); a version 1
// record without proxy reads as false, as that version's readers took it.
func (r *Record) HasProxy() (proxy, applies bool) {
	if r.Proxy == nil {
		return false, r.Version == Version1
	}
	return *r.Proxy, true
}

// Summary is the record on one line for a person: "single-stack IPv4, FIPS, no proxy,
// release 4.18.3 from quay.io".
func (r *Record) Summary() string {
	parts := []string{"any IP family"}
	if len(r.IPFamilies) > 0 {
		parts[0] = Describe(r.IPFamilies)
	}
	parts = append(parts, map[bool]string{true: "FIPS", false: "no FIPS"}[r.FIPS])
	if proxy, applies := r.HasProxy(); applies {
		parts = append(parts, map[bool]string{true: "proxy", false: "no proxy"}[proxy])
	}
	if r.ContainerStorageLabel != "" {
		parts = append(parts, "container storage on "+r.ContainerStorageLabel)
	}
	if r.ReleaseVersion != "" {
		rel := "release " + r.ReleaseVersion
		if r.ReleaseRegistry != "" {
			rel += " from " + r.ReleaseRegistry
		}
		parts = append(parts, rel)
	}
	return strings.Join(parts, ", ")
}
