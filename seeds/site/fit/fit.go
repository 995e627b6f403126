// Package fit checks that a seed can serve a site: the seed's record of what it was built
// with (seeds/contract/seedfit) against the site config, every problem at once, each naming
// both values and what to change. It is the check lifecycle-agent makes before an upgrade
// (controllers/prep_handlers.go validateSeedImageConfig: checkSeedImageProxyCompatibility,
// checkSeedImageFIPSCompatibility, checkSeedImageContainerStorageCompatibility) and at the
// site (lca-cli/postpivot/postpivot.go validateIPAndMachineNetworkConsistency,
// setProxyAndProxyStatus; internal/prep/prep.go SetupStateroot's seed version check), made
// before anything is written: by site-config validate --seed, seed write and the hook.
package fit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// ErrMisfit is what every refusal of Check wraps.
var ErrMisfit = errors.New("the seed cannot serve this site")

// Problem is one way the site and the seed differ.
type Problem struct {
	// Field is the site config path the problem is about (spec.network, spec.fips...).
	Field string
	// Msg names the site's value and the seed's; Fix says what to change.
	Msg, Fix string
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s; %s", p.Field, p.Msg, p.Fix) }

// Error is every problem Check found.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (e *Error) Is(target error) bool { return target == ErrMisfit }

// Check reports every way the site config sc asks for what the seed recorded in rec cannot
// give; nil when it fits. A seed without a record (sealed before it) fits every site.
func Check(rec *seedfit.Record, sc *siteconfig.SiteConfig) error {
	if rec == nil {
		return nil
	}
	var ps []Problem
	add := func(p *Problem) {
		if p != nil {
			ps = append(ps, *p)
		}
	}
	add(IPFamilies(rec.IPFamilies, SiteFamilies(sc.Spec.Network)))
	add(FIPS(rec.FIPS, sc.Spec.FIPS))
	if seed, applies := rec.HasProxy(); applies {
		add(Proxy(seed, sc.HasProxy()))
	}
	add(ReleaseVersion(rec.ReleaseVersion, sc.Spec.SeedVersion))
	if len(ps) == 0 {
		return nil
	}
	return &Error{Problems: ps}
}

// IPFamilies compares the seed's machine network families with the site's (nil: the site
// config does not say, and the seed's network stays). recert replaces addresses within a
// family; it cannot add or remove one, and lifecycle-agent refuses a site whose node IPs
// differ from the seed's in count or family (validateIPAndMachineNetworkConsistency).
func IPFamilies(seed, site []string) *Problem {
	if len(seed) == 0 || len(site) == 0 || strings.Join(seed, ",") == strings.Join(site, ",") {
		return nil
	}
	return &Problem{Field: "spec.network",
		Msg: fmt.Sprintf("the site network is %s but the seed was built %s: recert cannot add or remove an IP family",
			seedfit.Describe(site), seedfit.Describe(seed)),
		Fix: fmt.Sprintf("give the site %s addresses, or build the seed with a %s machine network (spec.openshift.machineNetwork)",
			familyWords(seed), seedfit.Describe(site))}
}

// FIPS compares FIPS mode: the mode is set when the node is installed, and lifecycle-agent
// refuses a seed whose FIPS setting differs from the cluster's either way
// (checkSeedImageFIPSCompatibility).
func FIPS(seed, site bool) *Problem {
	if seed == site {
		return nil
	}
	p := &Problem{Field: "spec.fips"}
	if site {
		p.Msg = "the site asks for FIPS mode (fips: true) but the seed was built without it: FIPS mode is set at install, recert cannot turn it on"
		p.Fix = "use a seed built with spec.openshift.fips: true in its blueprint, or drop fips from the site's install-config"
	} else {
		p.Msg = "the site does not ask for FIPS mode but the seed was built in it (fips: true): recert cannot turn it off"
		p.Fix = "set fips: true in the site's install-config (spec.fips), or use a seed built without fips"
	}
	return p
}

// Proxy compares the cluster-wide proxy: on both or on neither, as lifecycle-agent
// requires (checkSeedImageProxyCompatibility; post-pivot's setProxyAndProxyStatus refuses
// the same mismatch at the site).
func Proxy(seed, site bool) *Problem {
	if seed == site {
		return nil
	}
	p := &Problem{Field: "spec.proxy"}
	if site {
		p.Msg = "the site has a proxy but the seed was built without one: recert cannot add a cluster-wide proxy"
		p.Fix = "use a seed built behind a proxy, or remove the site's proxy"
	} else {
		p.Msg = "the site has no proxy but the seed was built with one: recert cannot remove a cluster-wide proxy"
		p.Fix = "give the site its proxy (spec.proxy), or use a seed built without one"
	}
	return p
}

// ReleaseVersion compares the release the site expects (empty: any) with the seed's, as
// lca-cli ibi checks the seed's version against the installation config's seedVersion
// (internal/prep/prep.go SetupStateroot).
func ReleaseVersion(seed, site string) *Problem {
	if site == "" || seed == site {
		return nil
	}
	have := seed
	if have == "" {
		have = "no OpenShift release"
	}
	return &Problem{Field: "spec.seedVersion",
		Msg: fmt.Sprintf("the site expects seed version %s but the seed carries %s", site, have),
		Fix: fmt.Sprintf("use a seed of release %s, or set spec.seedVersion to %s", site, have)}
}

// familyWords is what a person reads: "only IPv4", "only IPv6", "IPv4 and IPv6".
func familyWords(f []string) string {
	if len(f) == 2 {
		return "IPv4 and IPv6"
	}
	return "only " + strings.Replace(f[0], "ipv", "IPv", 1)
}

// SiteFamilies are the IP families the site's network gives the node, IPv4 first: an
// interface that is up with an enabled ipv4 (ipv6) block that has a static address or
// DHCP (or, for IPv6, autoconf). Link-local IPv6 addresses do not count. nil: the site
// config says nothing about addresses.
func SiteFamilies(n *siteconfig.Network) []string {
	if n == nil {
		return nil
	}
	var v4, v6 bool
	for _, i := range n.Interfaces {
		if i.State == "down" || i.State == "absent" {
			continue
		}
		v4 = v4 || gives(i.IPv4, false)
		v6 = v6 || gives(i.IPv6, true)
	}
	return seedfit.FamilyList(v4, v6)
}

func gives(c *siteconfig.IPConfig, v6 bool) bool {
	if !c.IsEnabled() {
		return false
	}
	if c.IsDHCP() || v6 && c.IsAutoconf() {
		return true
	}
	for _, a := range c.Address {
		if ip, err := netip.ParseAddr(a.IP); err == nil && !ip.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}
