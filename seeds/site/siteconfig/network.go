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
	// nmstate keeps one interface per kernel name (rust/src/lib/ifaces/inter_ifaces.rs
	// Interfaces::push replaces an earlier one): a second declaration would silently win.
	byName := map[string]Interface{}
	for i, iface := range n.Interfaces {
		p := fmt.Sprintf("spec.network.interfaces[%d]", i)
		c.iface(p, iface)
		if _, dup := byName[iface.Name]; dup && iface.Name != "" {
			c.Add(p+".name", fmt.Sprintf("interface %q listed twice", suggest.Clip(iface.Name)), "declare each interface once, with all its settings")
			continue
		}
		byName[iface.Name] = iface
	}
	c.bondPorts(n.Interfaces, byName)
	c.vlanBases(n.Interfaces, byName)
	if n.Routes != nil {
		c.routes(n.Routes.Config, byName)
	}
	if r := n.DNSResolver; r != nil {
		c.dns("spec.network.dns-resolver.config.server", "spec.network.dns-resolver.config.search", r.Config.Server, r.Config.Search)
	}
}

// Interface types the hook applies.
var ifaceTypes = []string{"ethernet", "bond", "vlan"}

// MTU bounds: the kernel's Ethernet minimum and maximum (include/uapi/linux/if_ether.h
// ETH_MIN_MTU, ETH_MAX_MTU), which nmstate compares a desired MTU with
// (rust/src/lib/ifaces/base.rs MergedInterface::validate_mtu against the device's
// min-mtu and max-mtu); IPv6 needs 1280 (RFC 8200 section 5), below which the kernel
// turns IPv6 off on the device (net/ipv6/addrconf.c addrconf_notify, NETDEV_CHANGEMTU).
const (
	minMTU, maxMTU, minIPv6MTU = 68, 65535, 1280
)

func (c *checker) iface(p string, iface Interface) {
	switch {
	case iface.Name == "":
		c.Add(p+".name", "required", "the kernel's interface name, e.g. eth0, enp1s0, bond0 or bond0.100")
	case len(iface.Name) > 15 || strings.ContainsAny(iface.Name, "/ \t\n:") || iface.Name == "." || iface.Name == "..":
		c.Add(p+".name", fmt.Sprintf("%q is not a Linux interface name", suggest.Clip(iface.Name)), "at most 15 characters, without '/', ':' or spaces")
	}
	switch iface.Type {
	case "ethernet":
	case "bond":
		c.bond(p, iface)
	case "vlan":
		c.vlan(p, iface)
	case "":
		c.Add(p+".type", "required", "type: ethernet, bond or vlan")
	default:
		c.Add(p+".type", fmt.Sprintf("interface type %q is %s", suggest.Clip(iface.Type), notSupported), "supported: "+strings.Join(ifaceTypes, ", "))
	}
	if iface.LinkAggregation != nil && iface.Type != "bond" {
		c.Add(p+".link-aggregation", "belongs to an interface of type bond", "type: bond, or remove link-aggregation")
	}
	if iface.VLAN != nil && iface.Type != "vlan" {
		c.Add(p+".vlan", "belongs to an interface of type vlan", "type: vlan, or remove the vlan block")
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
	if m := iface.MTU; m != nil {
		switch {
		case *m < minMTU || *m > maxMTU:
			c.Add(p+".mtu", fmt.Sprintf("%d is outside the Ethernet MTU range %d-%d", *m, minMTU, maxMTU), "e.g. 1500, or 9000 for jumbo frames")
		case *m < minIPv6MTU && iface.IPv6.IsEnabled():
			c.Add(p+".mtu", fmt.Sprintf("%d is below IPv6's minimum MTU %d, and ipv6 is enabled", *m, minIPv6MTU), "raise the MTU to at least 1280, or disable ipv6")
		}
	}
	c.ip(p+".ipv4", iface.IPv4, false)
	c.ip(p+".ipv6", iface.IPv6, true)
}

// vlan checks a VLAN's own block; its base against the document is checked by vlanBases.
func (c *checker) vlan(p string, iface Interface) {
	v := iface.VLAN
	if v == nil {
		c.Add(p, "a VLAN needs its vlan block", "vlan: {base-iface: bond0, id: 100}")
		return
	}
	if v.BaseIface == "" {
		// rust/src/lib/ifaces/vlan.rs VlanInterface::sanitize: "Missing 'vlan.base-iface'".
		c.Add(p+".vlan.base-iface", "required: the interface the VLAN is on", "an ethernet or bond interface declared in this document")
	}
	switch {
	case v.ID == nil:
		c.Add(p+".vlan.id", "required", "the VLAN ID, 1-4094")
	case *v.ID < 1 || *v.ID > 4094:
		// The kernel refuses 4095 and up (net/8021q/vlan_netlink.c vlan_validate); 0 only
		// tags priority (IEEE 802.1Q), it is no VLAN.
		c.Add(p+".vlan.id", fmt.Sprintf("%d is not a VLAN ID", *v.ID), "1-4094")
	}
	switch v.Protocol {
	case "", "802.1q", "802.1ad":
	default:
		c.Add(p+".vlan.protocol", fmt.Sprintf("%q is not one of 802.1q, 802.1ad", suggest.Clip(v.Protocol)), "")
	}
}

func (c *checker) ip(p string, cfg *IPConfig, v6 bool) {
	if cfg == nil {
		return
	}
	if cfg.Autoconf != nil && !v6 {
		// rust/src/lib/ip.rs InterfaceIpv4 deserialize: "autoconf is not allowed for IPv4".
		c.Add(p+".autoconf", "is not allowed for IPv4 (router advertisements are IPv6's)", "remove it, or move it under ipv6")
	}
	if !cfg.IsEnabled() {
		if cfg.IsDHCP() || len(cfg.Address) > 0 || cfg.IsAutoconf() {
			c.Add(p+".enabled", "is false, but dhcp, autoconf or address is set", "remove them, or enable the block")
		}
		return
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
			// rust/src/lib/ip.rs: "Got IPv6 address ... in ipv4 config section" and back.
			c.Add(ap+".ip", fmt.Sprintf("%q is not an %s address", suggest.Clip(a.IP), family), fmt.Sprintf("put it under ipv%s", map[bool]string{true: "4", false: "6"}[v6]))
		case seen[addr]:
			c.Add(ap+".ip", fmt.Sprintf("%s listed twice", addr), "")
		}
		seen[addr] = true
		// rust/src/lib/ip.rs: "Invalid IPv4 network prefix length"; a /0 address would put
		// every destination on the link, so the node could reach nothing beyond it.
		if a.PrefixLength < 1 || a.PrefixLength > bits {
			c.Add(ap+".prefix-length", fmt.Sprintf("must be between 1 and %d, got %d", bits, a.PrefixLength), "e.g. 24 for a /24")
		}
	}
}
