package siteconfig

import (
	"fmt"
	"net/netip"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// bondPorts checks each bond's ports against the document: each is an ethernet interface
// declared here (the hook applies the whole document, and a port it does not declare
// would keep whatever profile the node had), in one bond only, not the bond itself, and
// without IP of its own.
func (c *checker) bondPorts(ifaces []Interface, byName map[string]Interface) {
	owner := map[string]string{}
	for i, iface := range ifaces {
		if iface.Type != "bond" || iface.LinkAggregation == nil {
			continue
		}
		b := iface.LinkAggregation
		for _, list := range []struct {
			key   string
			ports []string
		}{{"port", b.Port}, {"ports", b.Ports}} {
			for j, port := range list.ports {
				p := fmt.Sprintf("spec.network.interfaces[%d].link-aggregation.%s[%d]", i, list.key, j)
				c.bondPort(p, iface.Name, port, byName, owner)
			}
		}
	}
	for i, iface := range ifaces {
		bond, ok := owner[iface.Name]
		if !ok {
			continue
		}
		// rust/src/lib/ifaces/base.rs MergedInterface::validate_can_have_ip: "cannot have IP
		// enabled as it is attached to a controller where IP is not allowed".
		for _, f := range []struct {
			key string
			cfg *IPConfig
		}{{"ipv4", iface.IPv4}, {"ipv6", iface.IPv6}} {
			if f.cfg.IsEnabled() {
				c.Add(fmt.Sprintf("spec.network.interfaces[%d].%s", i, f.key), fmt.Sprintf("%s is a port of bond %s, which carries the addresses", iface.Name, bond),
					fmt.Sprintf("give the addresses to %s (or to a VLAN on it) and set %s: {enabled: false} here, or leave the block out", bond, f.key))
			}
		}
	}
}

func (c *checker) bondPort(p, bond, port string, byName map[string]Interface, owner map[string]string) {
	target, declared := byName[port]
	switch {
	case port == bond:
		// rust/src/lib/ifaces/inter_ifaces_controller.rs validate_controller_not_in_port_list.
		c.Add(p, fmt.Sprintf("bond %s lists itself as a port", suggest.Clip(bond)), "list the ethernet interfaces it aggregates")
	case !declared:
		c.Add(p, fmt.Sprintf("no interface %q among the declared interfaces", suggest.Clip(port)),
			fmt.Sprintf("declare it: - {name: %s, type: ethernet, state: up}", suggest.Clip(port)))
	case target.Type != "ethernet":
		c.Add(p, fmt.Sprintf("%s is of type %s; a bond's ports are ethernet interfaces", suggest.Clip(port), suggest.Clip(target.Type)), "")
	case owner[port] == bond:
		c.Add(p, fmt.Sprintf("%s listed twice", suggest.Clip(port)), "")
	case owner[port] != "":
		// inter_ifaces_controller.rs validate_controller_in_other_port_list.
		c.Add(p, fmt.Sprintf("%s is already a port of bond %s", suggest.Clip(port), owner[port]), "an interface is a port of one bond only")
	}
	if declared && owner[port] == "" && port != bond {
		owner[port] = bond
	}
}

// vlanBases checks each VLAN's base against the document: an ethernet or bond interface
// declared here, one VLAN per base and ID (the kernel refuses a second: net/8021q/vlan.c
// register_vlan_dev, -EEXIST), and no larger MTU than the base's (vlan_dev.c
// vlan_dev_change_mtu, -ERANGE).
func (c *checker) vlanBases(ifaces []Interface, byName map[string]Interface) {
	type key struct {
		base string
		id   int
	}
	seen := map[key]string{}
	for i, iface := range ifaces {
		v := iface.VLAN
		if iface.Type != "vlan" || v == nil || v.BaseIface == "" {
			continue
		}
		p := fmt.Sprintf("spec.network.interfaces[%d].vlan", i)
		base, ok := byName[v.BaseIface]
		switch {
		case !ok:
			c.Add(p+".base-iface", fmt.Sprintf("no interface %q among the declared interfaces", suggest.Clip(v.BaseIface)),
				fmt.Sprintf("declare it (type ethernet or bond); with ipv4 and ipv6 {enabled: false} when it carries only VLANs"))
			continue
		case base.Type != "ethernet" && base.Type != "bond":
			c.Add(p+".base-iface", fmt.Sprintf("%s is of type %s; a VLAN goes on an ethernet or a bond interface", suggest.Clip(v.BaseIface), suggest.Clip(base.Type)), "")
		}
		if v.ID != nil {
			k := key{v.BaseIface, *v.ID}
			if other, dup := seen[k]; dup {
				c.Add(p+".id", fmt.Sprintf("%s already has VLAN %d (%s)", v.BaseIface, *v.ID, other), "one VLAN interface per base and ID")
			}
			seen[k] = iface.Name
		}
		if iface.MTU != nil && base.MTU != nil && *iface.MTU > *base.MTU {
			c.Add(fmt.Sprintf("spec.network.interfaces[%d].mtu", i), fmt.Sprintf("%d is larger than the MTU %d of its base %s", *iface.MTU, *base.MTU, v.BaseIface),
				fmt.Sprintf("raise %s's MTU, or lower this one", v.BaseIface))
		}
	}
}

func (c *checker) routes(rs []Route, ifaces map[string]Interface) {
	if len(rs) > maxRoutes {
		c.Add("spec.network.routes.config", fmt.Sprintf("%d routes, more than the limit of %d", len(rs), maxRoutes), "")
		return
	}
	for i, r := range rs {
		p := fmt.Sprintf("spec.network.routes.config[%d]", i)
		dst, err := netip.ParsePrefix(r.Destination)
		switch {
		case r.Destination == "":
			c.Add(p+".destination", "required", "a network in CIDR notation; 0.0.0.0/0 for the default route")
		case err != nil:
			c.Add(p+".destination", fmt.Sprintf("%q is not a network in CIDR notation", suggest.Clip(r.Destination)), "e.g. 0.0.0.0/0 or 192.168.1.0/24")
		case dst.Masked() != dst:
			c.Add(p+".destination", fmt.Sprintf("%s has host bits set", dst), fmt.Sprintf("did you mean %s?", dst.Masked()))
		}
		if r.Metric != nil && *r.Metric < 0 {
			c.Add(p+".metric", fmt.Sprintf("%d is negative", *r.Metric), "0 or more; lower is preferred")
		}
		if r.TableID != nil && *r.TableID < 0 {
			c.Add(p+".table-id", fmt.Sprintf("%d is negative", *r.TableID), "a routing table number, e.g. 100; 254 is the main table")
		}
		c.nextHop(p, r, dst, ifaces)
	}
}

// nextHop checks a route's next hop: nmstate needs the interface
// (rust/src/lib/route.rs Routes::validate: "Route with empty next hop interface is not
// supported"), which must carry the route's family (route.rs MergedRoutes::new: "has
// been marked as IPv4 disabled"); a gateway must be on one of that interface's subnets,
// or the kernel refuses the route (net/ipv4/fib_semantics.c fib_check_nh_v4_gw,
// net/ipv6/route.c ip6_validate_gw: "Nexthop has invalid gateway").
func (c *checker) nextHop(p string, r Route, dst netip.Prefix, ifaces map[string]Interface) {
	var hop netip.Addr
	if r.NextHopAddress != "" {
		var err error
		if hop, err = netip.ParseAddr(r.NextHopAddress); err != nil {
			c.Add(p+".next-hop-address", fmt.Sprintf("%q is not an IP address", suggest.Clip(r.NextHopAddress)), "")
			return
		}
		if dst.IsValid() && hop.Is4() != dst.Addr().Is4() {
			c.Add(p+".next-hop-address", "is not of the destination's address family", "")
			return
		}
	}
	iface, ok := ifaces[r.NextHopInterface]
	switch {
	case r.NextHopInterface == "":
		c.Add(p, "needs next-hop-interface (nmstate refuses a route without one)", "next-hop-interface: the interface the route leaves by, e.g. bond0.100")
		return
	case !ok:
		c.Add(p+".next-hop-interface", fmt.Sprintf("no interface %q among the declared interfaces", suggest.Clip(r.NextHopInterface)), "")
		return
	case !dst.IsValid():
		return
	}
	v6 := dst.Addr().Is6()
	cfg, family := iface.IPv4, "ipv4"
	if v6 {
		cfg, family = iface.IPv6, "ipv6"
	}
	if !cfg.IsEnabled() {
		c.Add(p+".next-hop-interface", fmt.Sprintf("%s has %s disabled, so it cannot carry this route", iface.Name, family), fmt.Sprintf("route it through the interface that has the %s addresses", family))
		return
	}
	dynamic := cfg.IsDHCP() || v6 && cfg.IsAutoconf()
	if !hop.IsValid() || dynamic || hop.Is6() && hop.IsLinkLocalUnicast() {
		return // the subnet is learned at the site, or the hop is on-link by definition
	}
	for _, a := range cfg.Address {
		if pfx, err := netip.ParseAddr(a.IP); err == nil {
			if sub, err := pfx.Prefix(a.PrefixLength); err == nil && sub.Contains(hop) {
				return
			}
		}
	}
	c.Add(p+".next-hop-address", fmt.Sprintf("%s is on none of %s's %s subnets", hop, iface.Name, family),
		"the gateway must be on the interface's own subnet: check the address, its prefix-length and next-hop-interface")
}
