package reconfigure

import (
	"crypto/sha1" //nolint:gosec // UUID version 5 is defined on SHA-1 (RFC 9562 section 5.5)
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// The keyfiles below are what nmstate's keyfile generator (`nmstatectl gc`, used by the
// image-based installer for static networks) writes for the same nmstate document, so a
// node with NetworkManager and an OpenShift node (nmstatectl apply) get the same profiles.
// Upstream is nmstate rust/src/lib/nm/gen_conf.rs nm_gen_conf and the settings it builds
// (rust/src/lib/nm/settings/*.rs), written by rust/src/lib/nm/nm_dbus/gen_conf/*.rs.

// NMKeyfile is one NetworkManager connection profile: its profile id and keyfile text.
type NMKeyfile struct {
	ID   string
	Data []byte
}

// FileName is the keyfile's name in NMConnectionsDir (gen_conf.rs nm_gen_conf: id.nmconnection).
func (k NMKeyfile) FileName() string { return k.ID + ".nmconnection" }

// nmstate's constants: dhcp and RA wait forever (settings/ip.rs gen_nm_ipv4_setting sets
// dhcp_timeout to i32::MAX), DNS priorities (dns.rs DEFAULT_DNS_PRIORITY and +10 for the
// family that is not preferred), the main table a route without table-id goes to
// (nm_dbus/gen_conf/route.rs DEFAULT_ROUTE_TABLE), and addr-gen-mode eui64 as the number
// NetworkManager's D-Bus API uses (settings/ip.rs nmstate_addr_gen_mode_to_nm).
const (
	nmForever          = "2147483647"
	nmDNSPriority      = 40
	nmMainTable        = 254
	nmAddrGenModeEUI64 = "0"
	nmDefaultArpMissed = "2" // settings/bond.rs: arp_missed_max is left out at its default
)

// section is one keyfile group: nm_dbus/gen_conf/keyfile.rs keyfile_sections_to_string
// writes the keys sorted and leaves out empty values.
type section struct {
	name string
	keys map[string]string
}

// nmConn is one profile being built; its sections are written in the order of
// nm_dbus/gen_conf/conn.rs NmConnection::to_keyfile.
type nmConn struct {
	iface                             siteconfig.Interface
	conn, bond, ip4, ip6, wired, vlan map[string]string
}

// NMKeyfiles are the profiles for the site network n, in the document's order. A document
// nmstate's generator refuses, or that NetworkManager cannot apply, is refused here with
// what to change; down interfaces get no profile, so NetworkManager leaves them down.
func NMKeyfiles(n *siteconfig.Network) ([]NMKeyfile, error) {
	if n == nil {
		return nil, nil
	}
	ports := map[string]string{} // port -> bond
	for _, iface := range n.Interfaces {
		if iface.Type == "bond" {
			for _, p := range iface.LinkAggregation.PortNames() {
				ports[p] = iface.Name
			}
		}
	}
	var conns []*nmConn
	byName := map[string]*nmConn{}
	for _, iface := range n.Interfaces {
		if iface.State == "down" {
			continue
		}
		c, err := newNMConn(iface, ports[iface.Name])
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", iface.Name, err)
		}
		conns = append(conns, c)
		byName[iface.Name] = c
	}
	if n.Routes != nil {
		if err := nmRoutes(n.Routes.Config, conns, byName); err != nil {
			return nil, err
		}
	}
	for _, c := range conns {
		if err := c.ipMethods(); err != nil {
			return nil, fmt.Errorf("interface %s: %w", c.iface.Name, err)
		}
	}
	if r := n.DNSResolver; r != nil && len(r.Config.Server) > 0 {
		if err := nmDNS(r.Config, conns); err != nil {
			return nil, err
		}
	}
	out := make([]NMKeyfile, 0, len(conns))
	for _, c := range conns {
		out = append(out, NMKeyfile{ID: c.iface.Name, Data: c.keyfile()})
	}
	return out, nil
}

// newNMConn fills the connection, bond, vlan and ethernet settings of one interface.
func newNMConn(iface siteconfig.Interface, bond string) (*nmConn, error) {
	c := &nmConn{iface: iface, conn: map[string]string{}}
	nmType := map[string]string{"ethernet": "802-3-ethernet", "bond": "bond", "vlan": "vlan"}[iface.Type]
	if nmType == "" {
		return nil, fmt.Errorf("type %q: NetworkManager keyfiles are written for ethernet, bond and vlan only", iface.Type)
	}
	// settings/connection.rs gen_nm_conn_setting: id is the interface name, uuid a stable
	// one from type and name (uuid_from_name_and_type), autoconnect on; a controller
	// activates its ports (autoconnect-slaves 1, nm_dbus/connection/conn.rs), -1 otherwise.
	c.conn["id"] = iface.Name
	c.conn["uuid"] = uuidV5URL(iface.Type + "://" + iface.Name)
	c.conn["type"] = nmType
	c.conn["interface-name"] = iface.Name
	c.conn["autoconnect"] = "true"
	c.conn["autoconnect-slaves"] = "-1"
	if bond != "" {
		c.conn["master"], c.conn["slave-type"] = bond, "bond"
	}
	switch iface.Type {
	case "bond":
		c.conn["autoconnect-slaves"] = "1"
		c.bond = nmBondOptions(iface.LinkAggregation)
	case "vlan":
		c.vlan = nmVLAN(iface.VLAN)
	}
	// settings/wired.rs gen_nm_wired_setting: mtu, and mac-address as cloned-mac-address
	// (the interface is named by its name, so nmstate sets the address, not matches it).
	if iface.MTU != nil || iface.MACAddress != "" {
		c.wired = map[string]string{"cloned-mac-address": iface.MACAddress}
		if iface.MTU != nil {
			c.wired["mtu"] = strconv.Itoa(*iface.MTU)
		}
	}
	if bond == "" {
		c.ip4, c.ip6 = map[string]string{}, map[string]string{}
	} // a port has no IP settings (settings/ip.rs gen_nm_ip_setting: can_have_ip)
	return c, nil
}

// nmVLAN is settings/vlan.rs gen_nm_vlan_setting: 802.1q is left to NetworkManager's
// default, and the flags (reorder-headers and registration) are 0 unless asked for.
func nmVLAN(v *siteconfig.VLAN) map[string]string {
	m := map[string]string{"parent": v.BaseIface, "id": strconv.Itoa(*v.ID), "flags": "0"}
	if v.Protocol == "802.1ad" {
		m["protocol"] = "802.1ad"
	}
	return m
}

// nmBondOptions is settings/bond.rs apply_bond_mode and apply_bond_options: enumerations
// by name (a number given is mapped to its name), all_slaves_active, tlb_dynamic_lb and
// use_carrier as 0/1, balance_slb as balance-slb.
func nmBondOptions(b *siteconfig.Bond) map[string]string {
	m := map[string]string{"mode": b.Mode}
	if i, err := strconv.Atoi(b.Mode); err == nil && i >= 0 && i < len(bondModes) {
		m["mode"] = bondModes[i]
	}
	for k, v := range b.Options {
		val := v.Value
		switch k {
		case "all_slaves_active":
			val = strconv.Itoa(slices.Index(bondOptionWords[k], bondWord(k, v.Value)))
		case "tlb_dynamic_lb", "use_carrier", "balance_slb":
			val = map[bool]string{true: "1", false: "0"}[v.Value == "true"]
		case "arp_missed_max":
			if val == nmDefaultArpMissed {
				continue
			}
		default:
			if bondOptionWords[k] != nil {
				val = bondWord(k, v.Value)
			}
		}
		if k == "balance_slb" {
			k = "balance-slb"
		}
		m[k] = val
	}
	return m
}

// bondModes and bondOptionWords are nmstate's enumerations in their numeric order
// (rust/src/lib/ifaces/bond.rs BondMode and the option enums).
var (
	bondModes       = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}
	bondOptionWords = map[string][]string{
		"ad_select":         {"stable", "bandwidth", "count"},
		"all_slaves_active": {"dropped", "delivered"},
		"arp_all_targets":   {"any", "all"},
		"arp_validate":      {"none", "active", "backup", "all", "filter", "filter_active", "filter_backup"},
		"fail_over_mac":     {"none", "active", "follow"},
		"lacp_rate":         {"slow", "fast"},
		"primary_reselect":  {"always", "better", "failure"},
		"xmit_hash_policy":  {"layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4", "vlan+srcmac"},
	}
)

func bondWord(k, v string) string {
	if i, err := strconv.Atoi(v); err == nil && i >= 0 && i < len(bondOptionWords[k]) {
		return bondOptionWords[k][i]
	}
	return v
}

// uuidV5URL is a version 5 UUID in the URL namespace (RFC 9562 section 5.5), as
// settings/connection.rs uuid_from_name_and_type makes with uuid::Uuid::new_v5.
func uuidV5URL(name string) string {
	ns := []byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.New() //nolint:gosec // see the import
	h.Write(ns)
	h.Write([]byte(name))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// keyfile writes the sections as nm_dbus/gen_conf/keyfile.rs keyfile_sections_to_string.
func (c *nmConn) keyfile() []byte {
	secs := []section{{"connection", c.conn}, {"bond", c.bond}, {"ipv4", c.ip4}, {"ipv6", c.ip6}, {"ethernet", c.wired}, {"vlan", c.vlan}}
	var b strings.Builder
	for _, s := range secs {
		if s.keys == nil {
			continue
		}
		fmt.Fprintf(&b, "[%s]\n", s.name)
		keys := make([]string, 0, len(s.keys))
		for k := range s.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if v := s.keys[k]; v != "" {
				fmt.Fprintf(&b, "%s=%s\n", k, v)
			}
		}
		b.WriteString("\n")
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// isV6 says whether a route destination or DNS server is IPv6.
func isV6(s string) bool {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Is6()
	}
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6()
}
