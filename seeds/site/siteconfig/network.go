package siteconfig

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// NMState renders the network as nmstate YAML, for nmstatectl apply on OpenShift.
func (n *Network) NMState() ([]byte, error) {
	b, err := yaml.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("rendering the nmstate network: %w", err)
	}
	return b, nil
}

func (c *checker) network(n *Network) {
	if len(n.Interfaces) > maxInterfaces {
		c.Add("spec.network.interfaces", fmt.Sprintf("%d interfaces, more than the limit of %d", len(n.Interfaces), maxInterfaces), "")
		return
	}
	names := map[string]bool{}
	for i, iface := range n.Interfaces {
		p := fmt.Sprintf("spec.network.interfaces[%d]", i)
		c.iface(p, iface)
		if names[iface.Name] && iface.Name != "" {
			c.Add(p+".name", fmt.Sprintf("interface %q listed twice", suggest.Clip(iface.Name)), "")
		}
		names[iface.Name] = true
	}
	if n.Routes != nil {
		c.routes(n.Routes.Config, names)
	}
	if r := n.DNSResolver; r != nil {
		c.dns("spec.network.dns-resolver.config.server", "spec.network.dns-resolver.config.search", r.Config.Server, r.Config.Search)
	}
}

func (c *checker) iface(p string, iface Interface) {
	switch {
	case iface.Name == "":
		c.Add(p+".name", "required", "the kernel's interface name, e.g. eth0 or enp1s0")
	case len(iface.Name) > 15 || strings.ContainsAny(iface.Name, "/ \t\n:") || iface.Name == "." || iface.Name == "..":
		c.Add(p+".name", fmt.Sprintf("%q is not a Linux interface name", suggest.Clip(iface.Name)), "at most 15 characters, without '/', ':' or spaces")
	}
	switch iface.Type {
	case "ethernet":
	case "":
		c.Add(p+".type", "required", "type: ethernet")
	default:
		c.Add(p+".type", fmt.Sprintf("interface type %q is %s", suggest.Clip(iface.Type), notSupported), "supported: ethernet")
	}
	if iface.MACAddress != "" {
		if hw, err := net.ParseMAC(iface.MACAddress); err != nil || len(hw) != 6 {
			c.Add(p+".mac-address", fmt.Sprintf("%q is not an Ethernet MAC address", suggest.Clip(iface.MACAddress)), "six hexadecimal pairs separated by colons, e.g. 52:54:00:12:34:56")
		}
	}
	switch iface.State {
	case "", "up", "down":
	default:
		c.Add(p+".state", fmt.Sprintf("state %q is not one of up, down", suggest.Clip(iface.State)), "")
	}
	c.ip(p+".ipv4", iface.IPv4, false)
	c.ip(p+".ipv6", iface.IPv6, true)
}

func (c *checker) ip(p string, cfg *IPConfig, v6 bool) {
	if cfg == nil {
		return
	}
	if !cfg.IsEnabled() {
		if cfg.DHCP || len(cfg.Address) > 0 {
			c.Add(p+".enabled", "is false, but dhcp or address is set", "remove them, or enable the block")
		}
		return
	}
	if cfg.DHCP && len(cfg.Address) > 0 {
		c.Add(p+".address", "static addresses together with dhcp are "+notSupported, "choose dhcp: true or a static address list")
	}
	if len(cfg.Address) > maxAddresses {
		c.Add(p+".address", fmt.Sprintf("%d addresses, more than the limit of %d", len(cfg.Address), maxAddresses), "")
		return
	}
	family, bits := "IPv4", 32
	if v6 {
		family, bits = "IPv6", 128
	}
	seen := map[netip.Addr]bool{}
	for i, a := range cfg.Address {
		ap := fmt.Sprintf("%s.address[%d]", p, i)
		addr, err := netip.ParseAddr(a.IP)
		switch {
		case a.IP == "":
			c.Add(ap+".ip", "required", "")
		case err != nil || strings.Contains(a.IP, "/"):
			c.Add(ap+".ip", fmt.Sprintf("%q is not an IP address", suggest.Clip(a.IP)), "the prefix goes in prefix-length: ip: 10.0.2.50, prefix-length: 24")
		case addr.Is6() != v6 || addr.Is4In6():
			c.Add(ap+".ip", fmt.Sprintf("%q is not an %s address", suggest.Clip(a.IP), family), fmt.Sprintf("put it under ipv%s", map[bool]string{true: "4", false: "6"}[v6]))
		case seen[addr]:
			c.Add(ap+".ip", fmt.Sprintf("%s listed twice", addr), "")
		}
		seen[addr] = true
		if a.PrefixLength < 1 || a.PrefixLength > bits {
			c.Add(ap+".prefix-length", fmt.Sprintf("must be between 1 and %d, got %d", bits, a.PrefixLength), "e.g. 24 for a /24")
		}
	}
}

func (c *checker) routes(rs []Route, ifaces map[string]bool) {
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
		if r.NextHopAddress == "" && r.NextHopInterface == "" {
			c.Add(p, "needs next-hop-address or next-hop-interface", "")
		}
		if r.NextHopAddress != "" {
			hop, err := netip.ParseAddr(r.NextHopAddress)
			switch {
			case err != nil:
				c.Add(p+".next-hop-address", fmt.Sprintf("%q is not an IP address", suggest.Clip(r.NextHopAddress)), "")
			case dst.IsValid() && hop.Is4() != dst.Addr().Is4():
				c.Add(p+".next-hop-address", "is not of the destination's address family", "")
			}
		}
		if r.NextHopInterface != "" && !ifaces[r.NextHopInterface] {
			c.Add(p+".next-hop-interface", fmt.Sprintf("no interface %q in spec.network.interfaces", suggest.Clip(r.NextHopInterface)), "")
		}
	}
}
