package reconfigure

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// nmRoutes stores each route on its next-hop interface's profile, as nmstate's
// rust/src/lib/nm/route.rs store_route_config does; the line and its options are
// nm_dbus/gen_conf/route.rs NmIpRoute::to_keyfile: "dest/prefix,next-hop,metric" with
// metric 0 when none is given (settings/route.rs gen_nm_ip_routes) and table=254 when
// no table-id is given.
func nmRoutes(routes []siteconfig.Route, conns []*nmConn, byName map[string]*nmConn) error {
	n4, n6 := map[*nmConn]int{}, map[*nmConn]int{}
	for i, rt := range routes {
		c := byName[rt.NextHopInterface]
		if rt.NextHopInterface == "" {
			c = connForNextHop(rt.NextHopAddress, conns)
		}
		if c == nil || c.ip4 == nil {
			return fmt.Errorf("route %d to %s: no interface with IP settings named %q holds it: give next-hop-interface an up, non-port interface of this document", i, rt.Destination, rt.NextHopInterface)
		}
		dst, err := netip.ParsePrefix(rt.Destination)
		if err != nil {
			return fmt.Errorf("route %d: destination %q is not a prefix: %w", i, rt.Destination, err)
		}
		ip, count := c.ip4, n4
		if dst.Addr().Is6() {
			ip, count = c.ip6, n6
		}
		metric, table := 0, nmMainTable
		if rt.Metric != nil {
			metric = *rt.Metric
		}
		if rt.TableID != nil {
			table = *rt.TableID
		}
		key := "route" + strconv.Itoa(count[c])
		count[c]++
		ip[key] = strings.Join([]string{dst.String(), rt.NextHopAddress, strconv.Itoa(metric)}, ",")
		ip[key+"_options"] = "table=" + strconv.Itoa(table)
	}
	return nil
}

// connForNextHop is the profile whose static address's subnet holds the next hop.
func connForNextHop(hop string, conns []*nmConn) *nmConn {
	a, err := netip.ParseAddr(hop)
	if err != nil {
		return nil
	}
	for _, c := range conns {
		for _, cfg := range []*siteconfig.IPConfig{c.iface.IPv4, c.iface.IPv6} {
			if !cfg.IsEnabled() {
				continue
			}
			for _, ad := range cfg.Address {
				if p, err := netip.ParsePrefix(ad.IP + "/" + strconv.Itoa(ad.PrefixLength)); err == nil && p.Masked().Contains(a) {
					return c
				}
			}
		}
	}
	return nil
}

// ipMethods sets each family's method and addresses: settings/ip.rs gen_nm_ipv4_setting
// and gen_nm_ipv6_setting.
func (c *nmConn) ipMethods() error {
	if c.ip4 == nil {
		return nil
	}
	c.ip4["method"] = ipMethod(c.iface.IPv4, c.ip4, false)
	if c.iface.IPv4.IsEnabled() && c.iface.IPv4.IsDHCP() {
		// gen_nm_ipv4_setting for an auto interface: client id from the MAC (the
		// default Dhcpv4ClientId::LinkLayerAddress), the host name sent, no timeout.
		c.ip4["dhcp-client-id"], c.ip4["dhcp-send-hostname"], c.ip4["dhcp-timeout"] = "mac", "true", nmForever
	}
	v6 := c.iface.IPv6
	if v6.IsEnabled() && v6.IsAutoconf() && !v6.IsDHCP() {
		// gen_nm_ipv6_setting: "Autoconf without DHCP is not supported yet".
		return errors.New("ipv6 autoconf without dhcp: nmstate cannot apply router advertisements alone; set ipv6 dhcp: true with autoconf: true, or give static addresses")
	}
	c.ip6["method"] = ipMethod(v6, c.ip6, true)
	if v6 != nil {
		// gen_nm_ipv6_setting sets addr-gen-mode whenever the ipv6 block is given.
		c.ip6["addr-gen-mode"] = nmAddrGenModeEUI64
	}
	if v6.IsEnabled() && v6.IsDHCP() {
		// gen_nm_ipv6_setting for an auto interface: the DUID and IAID from the MAC.
		c.ip6["dhcp-duid"], c.ip6["dhcp-iaid"], c.ip6["dhcp-send-hostname"] = "ll", "mac", "true"
		c.ip6["dhcp-timeout"], c.ip6["ra-timeout"] = nmForever, nmForever
	}
	return nil
}

// ipMethod is the family's method; static addresses go in as address0, address1, ...
// (nm_dbus/gen_conf/ip.rs NmSettingIp::to_keyfile).
func ipMethod(cfg *siteconfig.IPConfig, keys map[string]string, v6 bool) string {
	if !cfg.IsEnabled() {
		return "disabled"
	}
	for i, a := range cfg.Address {
		keys["address"+strconv.Itoa(i)] = a.IP + "/" + strconv.Itoa(a.PrefixLength)
	}
	hasRoutes := keys["route0"] != ""
	switch {
	case v6 && cfg.IsDHCP() && cfg.IsAutoconf():
		return "auto"
	case v6 && cfg.IsDHCP():
		return "dhcp"
	case !v6 && cfg.IsDHCP():
		return "auto"
	case len(cfg.Address) > 0 || hasRoutes:
		return "manual"
	case v6:
		return "link-local"
	}
	return "disabled"
}

// nmDNS stores the name servers as nmstate's rust/src/lib/nm/dns.rs
// store_dns_config_to_iface: each family's servers on the first interface preferred for
// it (find_dns_iface: static IP of that family, then any IP of it), the first server's
// family with the search domains and priority 40, the other family priority 50.
func nmDNS(cfg siteconfig.DNSResolverConfig, conns []*nmConn) error {
	var v4, v6 []string
	for _, s := range cfg.Server {
		if isV6(s) {
			v6 = append(v6, s)
		} else {
			v4 = append(v4, s)
		}
	}
	if len(cfg.Server) > 2 && mixedServers(cfg.Server) {
		// store_dns_config_to_iface: "Placing IPv4/IPv6 nameserver in the middle of
		// IPv6/IPv4 nameservers is not supported yet".
		return fmt.Errorf("dns-resolver servers %s mix the families in between: list all IPv4 servers, then all IPv6 ones (or the other way round)", strings.Join(cfg.Server, ", "))
	}
	prefer6 := isV6(cfg.Server[0])
	for _, fam := range []struct {
		v6      bool
		servers []string
	}{{true, v6}, {false, v4}} {
		if len(fam.servers) == 0 {
			continue
		}
		c := dnsConn(conns, fam.v6)
		if c == nil {
			return fmt.Errorf("dns-resolver servers %s: no interface has %s enabled to hold them (nmstate: failed to find suitable interface for DNS server)", strings.Join(fam.servers, ", "), map[bool]string{true: "IPv6", false: "IPv4"}[fam.v6])
		}
		keys, prio := c.ip4, nmDNSPriority
		if fam.v6 {
			keys = c.ip6
		}
		if fam.v6 == prefer6 {
			keys["dns-search"] = strings.Join(cfg.Search, ";")
		} else {
			prio += 10
		}
		keys["dns"], keys["dns-priority"] = strings.Join(fam.servers, ";"), strconv.Itoa(prio)
	}
	return nil
}

// mixedServers: one family, then the other, then the first again (dns.rs is_mixed_dns_servers).
func mixedServers(s []string) bool {
	changes := 0
	for i := 1; i < len(s); i++ {
		if isV6(s[i]) != isV6(s[i-1]) {
			changes++
		}
	}
	return changes > 1
}

// dnsConn is dns.rs find_dns_iface for a new configuration: is_iface_prefered_for_dns
// (static IP of the family; IPv6 needs an address), then is_iface_valid_for_dns (enabled).
func dnsConn(conns []*nmConn, v6 bool) *nmConn {
	cfgOf := func(c *nmConn) *siteconfig.IPConfig {
		if v6 {
			return c.iface.IPv6
		}
		return c.iface.IPv4
	}
	for _, preferred := range []bool{true, false} {
		for _, c := range conns {
			cfg := cfgOf(c)
			if c.ip4 == nil || cfg == nil || !cfg.IsEnabled() {
				continue
			}
			static := !cfg.IsDHCP() && (!v6 || len(cfg.Address) > 0)
			if static || !preferred {
				return c
			}
		}
	}
	return nil
}
