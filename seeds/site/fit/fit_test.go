package fit

import (
	"errors"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

func ptr[T any](v T) *T { return &v }

// network is a one-interface nmstate document with the given blocks.
func network(v4, v6 *siteconfig.IPConfig) *siteconfig.Network {
	return &siteconfig.Network{Interfaces: []siteconfig.Interface{{Name: "eth0", Type: "ethernet", IPv4: v4, IPv6: v6}}}
}

func static(ip string, prefix int) *siteconfig.IPConfig {
	return &siteconfig.IPConfig{Address: []siteconfig.Address{{IP: ip, PrefixLength: prefix}}}
}

func TestSiteFamilies(t *testing.T) {
	off := &siteconfig.IPConfig{Enabled: ptr(false)}
	for _, tc := range []struct {
		name string
		n    *siteconfig.Network
		want string
	}{
		{"no network", nil, ""},
		{"static IPv4", network(static("192.0.2.10", 24), nil), "ipv4"},
		{"DHCP IPv4, IPv6 off", network(&siteconfig.IPConfig{DHCP: ptr(true)}, off), "ipv4"},
		{"static IPv6", network(nil, static("2001:db8::10", 64)), "ipv6"},
		{"autoconf IPv6", network(off, &siteconfig.IPConfig{Autoconf: ptr(true)}), "ipv6"},
		{"dual-stack", network(static("192.0.2.10", 24), static("2001:db8::10", 64)), "ipv4,ipv6"},
		{"link-local IPv6 only is no IPv6", network(static("192.0.2.10", 24), static("fe80::10", 64)), "ipv4"},
		{"a disabled block gives nothing", network(&siteconfig.IPConfig{Enabled: ptr(false), Address: []siteconfig.Address{{IP: "192.0.2.10", PrefixLength: 24}}}, static("2001:db8::10", 64)), "ipv6"},
		{"an interface that is down gives nothing", &siteconfig.Network{Interfaces: []siteconfig.Interface{
			{Name: "eth0", Type: "ethernet", IPv4: static("192.0.2.10", 24)},
			{Name: "eth1", Type: "ethernet", State: "down", IPv6: static("2001:db8::10", 64)}}}, "ipv4"},
		{"families across interfaces", &siteconfig.Network{Interfaces: []siteconfig.Interface{
			{Name: "eth0", Type: "ethernet", IPv6: static("2001:db8::10", 64)},
			{Name: "eth0.100", Type: "vlan", IPv4: &siteconfig.IPConfig{DHCP: ptr(true)}}}}, "ipv4,ipv6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(SiteFamilies(tc.n), ","); got != tc.want {
				t.Errorf("SiteFamilies = %q, want %q", got, tc.want)
			}
		})
	}
}

// Each refusal names the site's value, the seed's and a fix; a site that matches is
// accepted; every problem is reported at once.
func TestCheck(t *testing.T) {
	v4 := []string{seedfit.IPv4}
	rec := func(edit func(*seedfit.Record)) *seedfit.Record {
		// An OpenShift seed: its record always says whether it has a proxy.
		r := &seedfit.Record{Version: seedfit.Version, IPFamilies: v4, ReleaseVersion: "4.18.3", Proxy: boolPtr(false)}
		if edit != nil {
			edit(r)
		}
		return r
	}
	site := func(edit func(*siteconfig.Spec)) *siteconfig.SiteConfig {
		sc := &siteconfig.SiteConfig{Spec: siteconfig.Spec{Hostname: "edge", Network: network(static("192.0.2.10", 24), nil)}}
		if edit != nil {
			edit(&sc.Spec)
		}
		return sc
	}
	for _, tc := range []struct {
		name string
		rec  *seedfit.Record
		sc   *siteconfig.SiteConfig
		want []string // each a problem's text, in order; none: it fits
	}{
		{"fits", rec(nil), site(nil), nil},
		{"a seed without a record fits anything", nil, site(func(s *siteconfig.Spec) { s.FIPS = true }), nil},
		{"a site without a network keeps the seed's", rec(nil), site(func(s *siteconfig.Spec) { s.Network = nil }), nil},
		{"the conformance OS records no family", rec(func(r *seedfit.Record) { r.IPFamilies = nil }),
			site(func(s *siteconfig.Spec) { s.Network = network(nil, static("2001:db8::10", 64)) }), nil},
		{"dual-stack site, IPv4 seed", rec(nil),
			site(func(s *siteconfig.Spec) { s.Network = network(static("192.0.2.10", 24), static("2001:db8::10", 64)) }),
			[]string{"spec.network: the site network is dual-stack (IPv4+IPv6) but the seed was built single-stack IPv4: recert cannot add or remove an IP family; " +
				"give the site only IPv4 addresses, or build the seed with a dual-stack (IPv4+IPv6) machine network (spec.openshift.machineNetwork)"}},
		{"IPv6 site, IPv4 seed", rec(nil), site(func(s *siteconfig.Spec) { s.Network = network(nil, static("2001:db8::10", 64)) }),
			[]string{"the site network is single-stack IPv6 but the seed was built single-stack IPv4"}},
		{"IPv4 site, dual-stack seed", rec(func(r *seedfit.Record) { r.IPFamilies = []string{seedfit.IPv4, seedfit.IPv6} }), site(nil),
			[]string{"the site network is single-stack IPv4 but the seed was built dual-stack (IPv4+IPv6)", "give the site IPv4 and IPv6 addresses"}},
		{"FIPS site, seed without", rec(nil), site(func(s *siteconfig.Spec) { s.FIPS = true }),
			[]string{"spec.fips: the site asks for FIPS mode (fips: true) but the seed was built without it", "spec.openshift.fips: true"}},
		{"site without FIPS, FIPS seed", rec(func(r *seedfit.Record) { r.FIPS = true }), site(nil),
			[]string{"spec.fips: the site does not ask for FIPS mode but the seed was built in it"}},
		{"proxy seed, site without", rec(func(r *seedfit.Record) { r.Proxy = boolPtr(true) }), site(nil),
			[]string{"spec.proxy: the site has no proxy but the seed was built with one"}},
		{"proxy site, seed without", rec(nil), site(func(s *siteconfig.Spec) { s.Proxy = &siteconfig.Proxy{HTTPProxy: "http://proxy.example:3128"} }),
			[]string{"spec.proxy: the site has a proxy but the seed was built without one"}},
		{"proxy on both", rec(func(r *seedfit.Record) { r.Proxy = boolPtr(true) }),
			site(func(s *siteconfig.Spec) { s.Proxy = &siteconfig.Proxy{HTTPProxy: "http://proxy.example:3128"} }), nil},
		{"the conformance OS has no proxy to compare", rec(func(r *seedfit.Record) { r.Proxy, r.IPFamilies, r.ReleaseVersion = nil, nil, "" }),
			site(func(s *siteconfig.Spec) { s.Proxy = &siteconfig.Proxy{HTTPProxy: "http://proxy.example:3128"} }), nil},
		{"a version 1 record without proxy had none", rec(func(r *seedfit.Record) { r.Version, r.Proxy = seedfit.Version1, nil }),
			site(func(s *siteconfig.Spec) { s.Proxy = &siteconfig.Proxy{HTTPProxy: "http://proxy.example:3128"} }),
			[]string{"spec.proxy: the site has a proxy but the seed was built without one"}},
		{"another seed version", rec(nil), site(func(s *siteconfig.Spec) { s.SeedVersion = "4.18.5" }),
			[]string{"spec.seedVersion: the site expects seed version 4.18.5 but the seed carries 4.18.3; use a seed of release 4.18.5, or set spec.seedVersion to 4.18.3"}},
		{"the same seed version", rec(nil), site(func(s *siteconfig.Spec) { s.SeedVersion = "4.18.3" }), nil},
		{"all at once", rec(func(r *seedfit.Record) { r.FIPS = true }),
			site(func(s *siteconfig.Spec) {
				s.SeedVersion = "4.19.0"
				s.Network = network(nil, static("2001:db8::10", 64))
			}),
			[]string{"spec.network: ", "spec.fips: ", "spec.seedVersion: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.rec, tc.sc)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || !errors.Is(err, ErrMisfit) {
				t.Fatalf("Check = %v, want an *Error wrapping ErrMisfit", err)
			}
			if tc.name == "all at once" && len(fe.Problems) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(fe.Problems), len(tc.want), err)
			}
			for i, w := range tc.want {
				got := err.Error()
				if tc.name == "all at once" {
					got = fe.Problems[i].String()
				}
				if !strings.Contains(got, w) {
					t.Errorf("problem lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// The proxy comparison is both ways: on both or on neither.
func TestProxy(t *testing.T) {
	for _, tc := range []struct {
		seed, site bool
		want       string
	}{
		{false, false, ""},
		{true, true, ""},
		{false, true, "the site has a proxy but the seed was built without one"},
		{true, false, "the site has no proxy but the seed was built with one"},
	} {
		p := Proxy(tc.seed, tc.site)
		switch {
		case tc.want == "" && p != nil:
			t.Errorf("seed %v site %v: refused: %v", tc.seed, tc.site, p)
		case tc.want != "" && (p == nil || !strings.Contains(p.Msg, tc.want) || p.Fix == ""):
			t.Errorf("seed %v site %v: %v, want %q and a fix", tc.seed, tc.site, p, tc.want)
		}
	}
}

func boolPtr(b bool) *bool { return &b }
