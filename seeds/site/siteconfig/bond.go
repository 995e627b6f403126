package siteconfig

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// Bond is nmstate's link-aggregation block (rust/src/lib/ifaces/bond.rs BondConfig).
// nmstate reads the port list as port or, as an alias, ports.
type Bond struct {
	Mode    string                 `yaml:"mode,omitempty"`
	Options map[string]OptionValue `yaml:"options,omitempty"`
	Port    []string               `yaml:"port,omitempty"`
	Ports   []string               `yaml:"ports,omitempty"`
}

// PortNames are the bond's ports, from port or its alias ports.
func (b *Bond) PortNames() []string {
	if b == nil {
		return nil
	}
	return append(slices.Clone(b.Port), b.Ports...)
}

// VLAN is nmstate's vlan block (rust/src/lib/ifaces/vlan.rs VlanConfig).
type VLAN struct {
	BaseIface string `yaml:"base-iface"`
	ID        *int   `yaml:"id"`
	Protocol  string `yaml:"protocol,omitempty"`
}

// OptionValue is a bond option as written: nmstate takes numbers as integers or decimal
// strings (rust/src/lib/deserializer.rs u32_or_string) and enumerations by name or number.
type OptionValue struct {
	Value string
	Tag   string // !!int, !!str or !!bool
}

// UnmarshalYAML takes one scalar; an integer is kept in decimal.
func (o *OptionValue) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("a bond option is one number, word or true/false, got %s", strictyaml.Describe(n))
	}
	switch n.Tag {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("integer %s is out of range", n.Value)
		}
		o.Value = strconv.FormatInt(i, 10)
	case "!!str", "!!bool":
		o.Value = n.Value
	default:
		return fmt.Errorf("a bond option is one number, word or true/false, got %s", strictyaml.Describe(n))
	}
	o.Tag = n.Tag
	return nil
}

// MarshalYAML writes the value back as it was given.
func (o OptionValue) MarshalYAML() (any, error) {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: o.Tag, Value: o.Value}, nil
}

// bondModes are nmstate's BondMode names with their numeric aliases (bond.rs BondMode).
var bondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

// bondOption is what one nmstate bond option takes (bond.rs BondOptions, each field's type;
// the kernel's ranges in drivers/net/bonding/bond_options.c bond_opts where narrower).
type bondOption struct {
	min, max int64    // a number in [min, max]
	words    []string // or one of these names, each also by its index
	kind     string   // "bool", "mac", "ipv4list", "port"
}

const u32 = 1<<32 - 1

var bondOptions = map[string]bondOption{
	"ad_actor_sys_prio": {min: 1, max: 65535}, "ad_user_port_key": {max: 1023},
	"arp_interval": {max: u32}, "downdelay": {max: u32}, "updelay": {max: u32}, "miimon": {max: u32},
	"lp_interval": {min: 1, max: u32}, "min_links": {max: u32}, "packets_per_slave": {max: 65535},
	"num_grat_arp": {max: 255}, "num_unsol_na": {max: 255}, "resend_igmp": {max: 255}, "arp_missed_max": {min: 1, max: 255},
	"ad_select":         {words: []string{"stable", "bandwidth", "count"}},
	"all_slaves_active": {words: []string{"dropped", "delivered"}},
	"arp_all_targets":   {words: []string{"any", "all"}},
	"arp_validate":      {words: []string{"none", "active", "backup", "all", "filter", "filter_active", "filter_backup"}},
	"fail_over_mac":     {words: []string{"none", "active", "follow"}},
	"lacp_rate":         {words: []string{"slow", "fast"}},
	"primary_reselect":  {words: []string{"always", "better", "failure"}},
	"xmit_hash_policy":  {words: []string{"layer2", "layer3+4", "layer2+3", "encap2+3", "encap3+4", "vlan+srcmac"}},
	"tlb_dynamic_lb":    {kind: "bool"}, "use_carrier": {kind: "bool"}, "balance_slb": {kind: "bool"},
	"ad_actor_system": {kind: "mac"}, "arp_ip_target": {kind: "ipv4list"}, "primary": {kind: "port"},
}

// word is an enumeration option's name: its number, when given by index, mapped back.
func (o bondOption) word(v OptionValue) (string, bool) {
	if i, err := strconv.Atoi(v.Value); err == nil && i >= 0 && i < len(o.words) {
		return o.words[i], true
	}
	return v.Value, slices.Contains(o.words, v.Value)
}

// checkValue says what is wrong with v for option o ("" when nothing).
func (o bondOption) checkValue(v OptionValue, ports []string) string {
	switch {
	case o.kind == "bool":
		if v.Tag != "!!bool" {
			return fmt.Sprintf("%q is not true or false", suggest.Clip(v.Value))
		}
	case o.kind == "mac":
		if hw, err := net.ParseMAC(v.Value); err != nil || len(hw) != 6 {
			return fmt.Sprintf("%q is not an Ethernet MAC address", suggest.Clip(v.Value))
		}
	case o.kind == "ipv4list":
		for _, a := range strings.Split(v.Value, ",") {
			if ip, err := netip.ParseAddr(strings.TrimSpace(a)); err != nil || !ip.Is4() {
				return fmt.Sprintf("%q is not an IPv4 address", suggest.Clip(a))
			}
		}
	case o.kind == "port":
		if !slices.Contains(ports, v.Value) {
			return fmt.Sprintf("%q is not a port of this bond", suggest.Clip(v.Value))
		}
	case o.words != nil:
		if _, ok := o.word(v); !ok {
			return fmt.Sprintf("%q is not one of %s", suggest.Clip(v.Value), strings.Join(o.words, ", "))
		}
	default:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil || v.Tag == "!!bool" || n < o.min || n > o.max {
			return fmt.Sprintf("%q is not a whole number from %d to %d", suggest.Clip(v.Value), o.min, o.max)
		}
	}
	return ""
}

// bond checks a bond's own block; the ports against the document are checked by ports.
func (c *checker) bond(p string, iface Interface) {
	b := iface.LinkAggregation
	bp := p + ".link-aggregation"
	if b == nil {
		// bond.rs validate_new_iface_with_no_mode: a new bond needs a mode.
		c.Add(p, "a bond needs link-aggregation with its mode and ports", "link-aggregation: {mode: active-backup, port: [eno1, eno2]}")
		return
	}
	switch i := slices.Index(bondModes, b.Mode); {
	case b.Mode == "":
		c.Add(bp+".mode", "required for a new bond (nmstate refuses a bond without one)", "one of "+strings.Join(bondModes, ", "))
	case i < 0 && !isModeIndex(b.Mode):
		c.Add(bp+".mode", fmt.Sprintf("%q is not a bond mode", suggest.Clip(b.Mode)), "one of "+strings.Join(bondModes, ", "))
	}
	if len(b.Port) > 0 && len(b.Ports) > 0 {
		// serde reads ports as an alias of port: both at once is a duplicate field.
		c.Add(bp+".ports", "port and ports are the same list (ports is nmstate's alias)", "keep one of them")
	}
	c.bondOptions(bp+".options", iface)
}

func isModeIndex(m string) bool {
	i, err := strconv.Atoi(m)
	return err == nil && i >= 0 && i < len(bondModes)
}

// bondOptions checks each option's value and nmstate's rules across options.
func (c *checker) bondOptions(p string, iface Interface) {
	opts := iface.LinkAggregation.Options
	names := make([]string, 0, len(opts))
	for k := range opts {
		names = append(names, k)
	}
	slices.Sort(names)
	ports := iface.LinkAggregation.PortNames()
	for _, k := range names {
		o, ok := bondOptions[k]
		if !ok {
			known := make([]string, 0, len(bondOptions))
			for n := range bondOptions {
				known = append(known, n)
			}
			hint := "nmstate's bond options are the kernel's names, e.g. miimon, lacp_rate, xmit_hash_policy"
			if m := suggest.Closest(k, known); m != "" {
				hint = fmt.Sprintf("did you mean %q?", m)
			}
			c.Add(p+"."+k, fmt.Sprintf("%q is not an nmstate bond option", suggest.Clip(k)), hint)
			continue
		}
		if msg := o.checkValue(opts[k], ports); msg != "" {
			c.Add(p+"."+k, msg, "")
		}
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(opts[k].Value, 10, 64); return n }
	// bond.rs BondOptions::validate_miimon_and_arp_interval.
	if num("miimon") > 0 && num("arp_interval") > 0 {
		c.Add(p+".arp_interval", "miimon and arp_interval cannot both be on (nmstate refuses them together)", "monitor links with miimon, or with arp_interval and arp_ip_target")
	}
	// bond.rs BondOptions::validate_ad_actor_system_mac_address.
	if v, ok := opts["ad_actor_system"]; ok && strings.HasPrefix(strings.ToUpper(v.Value), "01:00:5E") {
		c.Add(p+".ad_actor_system", "cannot be an IANA multicast address (01:00:5E...)", "a locally administered unicast address, e.g. 02:00:00:00:00:01")
	}
	// bond.rs BondOptions::validate_balance_slb.
	if v, ok := opts["balance_slb"]; ok && v.Value == "true" {
		if w, _ := bondOptions["xmit_hash_policy"].word(opts["xmit_hash_policy"]); w != "vlan+srcmac" || c.modeName(iface) != "balance-xor" {
			c.Add(p+".balance_slb", "needs mode balance-xor and xmit_hash_policy vlan+srcmac", "")
		}
	}
	// bond.rs BondInterface::validate_mac_restricted_mode.
	if w, _ := bondOptions["fail_over_mac"].word(opts["fail_over_mac"]); w == "active" && c.modeName(iface) == "active-backup" && iface.MACAddress != "" {
		c.Add(p+".fail_over_mac", "fail_over_mac active in active-backup mode cannot go with the bond's mac-address", "remove mac-address or fail_over_mac")
	}
}

// modeName is the bond's mode by name, a numeric alias mapped back.
func (c *checker) modeName(iface Interface) string {
	m := iface.LinkAggregation.Mode
	if i, err := strconv.Atoi(m); err == nil && i >= 0 && i < len(bondModes) {
		return bondModes[i]
	}
	return m
}
