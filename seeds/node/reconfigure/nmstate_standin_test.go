package reconfigure

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// nmStateKeys are the top-level keys of nmstate's NetworkState, which refuses any other
// (nmstate rust/src/lib/net_state.rs NetworkState: #[serde(deny_unknown_fields)]).
var nmStateKeys = []string{"hostname", "dns-resolver", "route-rules", "routes", "interfaces", "ovs-db", "ovn", "description", "version"}

// nmState is the part of nmstate's NetworkState the stand-in applies.
type nmState struct {
	Interfaces []struct {
		Name  string `yaml:"name"`
		Type  string `yaml:"type"`
		State string `yaml:"state"`
		MTU   int    `yaml:"mtu"`
		IPv4  *nmIP  `yaml:"ipv4"`
		IPv6  *nmIP  `yaml:"ipv6"`
		Bond  *struct {
			Mode    string            `yaml:"mode"`
			Options map[string]string `yaml:"options"`
			Port    []string          `yaml:"port"`
			Ports   []string          `yaml:"ports"`
		} `yaml:"link-aggregation"`
		VLAN *struct {
			BaseIface string `yaml:"base-iface"`
			ID        int    `yaml:"id"`
		} `yaml:"vlan"`
	} `yaml:"interfaces"`
	Routes struct {
		Config []struct {
			Destination string `yaml:"destination"`
			Via         string `yaml:"next-hop-address"`
			Iface       string `yaml:"next-hop-interface"`
			Metric      *int   `yaml:"metric"`
			Table       *int   `yaml:"table-id"`
		} `yaml:"config"`
	} `yaml:"routes"`
	DNS struct {
		Config struct {
			Server []string `yaml:"server"`
			Search []string `yaml:"search"`
		} `yaml:"config"`
	} `yaml:"dns-resolver"`
}

type nmIP struct {
	Enabled  *bool `yaml:"enabled"`
	DHCP     bool  `yaml:"dhcp"`
	Autoconf bool  `yaml:"autoconf"`
	Address  []struct {
		IP     string `yaml:"ip"`
		Prefix int    `yaml:"prefix-length"`
	} `yaml:"address"`
}

// nmstatectl imitates nmstate's nmstatectl apply (rust/src/cli/apply.rs apply): it reads a
// YAML state and refuses invalid YAML, unknown keys and what nmstate refuses before it
// changes anything (a bond without mode: rust/src/lib/ifaces/bond.rs
// validate_new_iface_with_no_mode; a VLAN without base-iface: ifaces/vlan.rs
// VlanInterface::sanitize; a route without next-hop-interface: route.rs Routes::validate).
// It keeps each interface's profile as the NetworkManager keyfile named after the
// interface, nmstate's connection id (nm-settings-keyfile(5)): a bond port names its bond
// (master, slave-type), a VLAN its parent and ID, each its routes and, on the default
// route's interface, DNS in its ipv4/ipv6 section, as nmstate's NM backend sets them
// (rust/src/lib/nm/settings/ bond.rs, vlan.rs, ip.rs, route.rs; nm/dns.rs). It prints the state it applied on stdout.
func nmstatectl(c *commands, args []string) ([]byte, error) {
	argv := append([]string{"nmstatectl"}, args...)
	if len(args) != 2 || args[0] != "apply" {
		return nil, fail(argv, 1, "error: unexpected arguments")
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return nil, fail(argv, 1, "[ERROR] Failed to read file "+args[1]+": "+err.Error())
	}
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		return nil, fail(argv, 1, "NmstateError: InvalidArgument: Invalid YAML string: "+err.Error())
	}
	for k := range top {
		if !slices.Contains(nmStateKeys, k) {
			return nil, fail(argv, 1, fmt.Sprintf("NmstateError: InvalidArgument: unknown field `%s`", k))
		}
	}
	var st nmState
	if err := yaml.Unmarshal(b, &st); err != nil {
		return nil, fail(argv, 1, "NmstateError: InvalidArgument: "+err.Error())
	}
	if msg := nmstateRefuses(&st); msg != "" {
		return nil, fail(argv, 1, msg)
	}
	for name, kf := range keyfiles(&st) {
		p := filepath.Join(c.root, NMConnectionsDir, name+".nmconnection")
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(kf), 0o600); err != nil {
			return nil, fail(argv, 1, err.Error())
		}
	}
	return append([]byte("---\n"), b...), nil
}

func nmstateRefuses(st *nmState) string {
	for _, i := range st.Interfaces {
		switch {
		case i.Name == "":
			return "NmstateError: InvalidArgument: missing field `name`"
		case i.Type == "bond" && (i.Bond == nil || i.Bond.Mode == "") && i.State != "down":
			return "NmstateError: InvalidArgument: Bond mode is mandatory for new bond interface: " + i.Name
		case i.Type == "vlan" && i.VLAN != nil && i.VLAN.BaseIface == "":
			return "NmstateError: InvalidArgument: Missing 'vlan.base-iface' for interface '" + i.Name + "'"
		}
	}
	for _, r := range st.Routes.Config {
		if r.Iface == "" {
			return fmt.Sprintf("NmstateError: NotImplementedError: Route with empty next hop interface is not supported: %+v", r)
		}
	}
	return ""
}

// keyfiles renders each interface's profile.
func keyfiles(st *nmState) map[string]string {
	controller := map[string]string{}
	for _, i := range st.Interfaces {
		if i.Bond != nil {
			for _, p := range append(i.Bond.Port, i.Bond.Ports...) {
				controller[p] = i.Name
			}
		}
	}
	out := map[string]string{}
	for _, i := range st.Interfaces {
		var b strings.Builder
		fmt.Fprintf(&b, "[connection]\nid=%s\ntype=%s\ninterface-name=%s\n", i.Name, i.Type, i.Name)
		if c, ok := controller[i.Name]; ok {
			fmt.Fprintf(&b, "master=%s\nslave-type=bond\n", c)
		}
		if i.MTU > 0 {
			fmt.Fprintf(&b, "\n[ethernet]\nmtu=%d\n", i.MTU)
		}
		if i.Bond != nil {
			fmt.Fprintf(&b, "\n[bond]\nmode=%s\n", i.Bond.Mode)
			keys := make([]string, 0, len(i.Bond.Options))
			for k := range i.Bond.Options {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "%s=%s\n", k, i.Bond.Options[k])
			}
		}
		if i.VLAN != nil {
			fmt.Fprintf(&b, "\n[vlan]\nid=%d\nparent=%s\n", i.VLAN.ID, i.VLAN.BaseIface)
		}
		for _, fam := range []struct {
			sec string
			ip  *nmIP
		}{{"ipv4", i.IPv4}, {"ipv6", i.IPv6}} {
			b.WriteString(ipSection(st, i.Name, fam.sec, fam.ip))
		}
		out[i.Name] = b.String()
	}
	return out
}

func ipSection(st *nmState, iface, sec string, ip *nmIP) string {
	var b strings.Builder
	method := "disabled"
	switch {
	case ip == nil || ip.Enabled != nil && !*ip.Enabled:
	case ip.DHCP || ip.Autoconf:
		method = "auto"
	case len(ip.Address) > 0:
		method = "manual"
	}
	fmt.Fprintf(&b, "\n[%s]\nmethod=%s\n", sec, method)
	if ip == nil {
		return b.String()
	}
	for n, a := range ip.Address {
		fmt.Fprintf(&b, "address%d=%s/%d\n", n+1, a.IP, a.Prefix)
	}
	n, gateway := 0, false
	for _, r := range st.Routes.Config {
		if r.Iface != iface || strings.Contains(r.Destination, ":") != (sec == "ipv6") {
			continue
		}
		n++
		gateway = gateway || r.Destination == "0.0.0.0/0" || r.Destination == "::/0"
		fmt.Fprintf(&b, "route%d=%s,%s", n, r.Destination, r.Via)
		if r.Metric != nil {
			fmt.Fprintf(&b, ",%d", *r.Metric)
		}
		b.WriteString("\n")
		if r.Table != nil {
			fmt.Fprintf(&b, "route%d_options=table=%d\n", n, *r.Table)
		}
	}
	// DNS goes on the interface that holds the family's default route (rust/src/lib/nm/dns.rs
	// store_dns_config_to_iface).
	var dns []string
	for _, d := range st.DNS.Config.Server {
		if strings.Contains(d, ":") == (sec == "ipv6") && gateway {
			dns = append(dns, d)
		}
	}
	if len(dns) > 0 {
		fmt.Fprintf(&b, "dns=%s;\ndns-search=%s;\n", strings.Join(dns, ";"), strings.Join(st.DNS.Config.Search, ";"))
	}
	return b.String()
}
