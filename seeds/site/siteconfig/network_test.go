package siteconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

func bondVLANDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/bond-vlan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit replaces old (which must be there, once) in doc.
func edit(t *testing.T, doc, old, new string) string {
	t.Helper()
	if strings.Count(doc, old) != 1 {
		t.Fatalf("%q occurs %d times in the document", old, strings.Count(doc, old))
	}
	return strings.Replace(doc, old, new, 1)
}

// Each refusal is nmstate's, the kernel's under it, or the hook's, at the line and column
// of the value at fault, with a hint.
func TestNetworkValidation(t *testing.T) {
	const ifs = "spec.network.interfaces"
	tests := []struct {
		name, old, new string
		path, msg      string
		hint           string
		line, col      int
	}{
		{"VLAN on an undeclared interface", "base-iface: bond0\n          id: 100", "base-iface: bond1\n          id: 100", ifs + "[3].vlan.base-iface", `no interface "bond1"`, "declare it", 42, 23},
		{"VLAN without base", "          base-iface: bond0\n          id: 100", "          id: 100", ifs + "[3].vlan.base-iface", "required", "ethernet or bond", 41, 9},
		{"VLAN ID too large", "id: 100\n", "id: 4095\n", ifs + "[3].vlan.id", "4095 is not a VLAN ID", "1-4094", 43, 15},
		{"VLAN ID zero", "id: 200}", "id: 0}", ifs + "[4].vlan.id", "0 is not a VLAN ID", "1-4094", 61, 39},
		{"VLAN ID twice on a base", "id: 200}", "id: 100}", ifs + "[4].vlan.id", "bond0 already has VLAN 100 (bond0.100)", "one VLAN interface per base", 61, 39},
		{"VLAN on a VLAN", "{base-iface: bond0, id: 200}", "{base-iface: bond0.100, id: 200}", ifs + "[4].vlan.base-iface", "bond0.100 is of type vlan", "", 61, 28},
		{"VLAN larger MTU than its base", "mtu: 1500", "mtu: 9100", ifs + "[3].mtu", "9100 is larger than the MTU 9000 of its base bond0", "raise bond0's MTU", 40, 14},
		{"MTU below Ethernet's", "mtu: 1500", "mtu: 60", ifs + "[3].mtu", "outside the Ethernet MTU range 68-65535", "1500", 40, 14},
		{"MTU below IPv6's", "mtu: 1500", "mtu: 1200", ifs + "[3].mtu", "below IPv6's minimum MTU 1280", "disable ipv6", 40, 14},
		{"bond port undeclared", "port: [eno1, eno2]", "port: [eno1, eno3]", ifs + "[2].link-aggregation.port[1]", `no interface "eno3"`, "type: ethernet", 36, 24},
		{"bond port not an ethernet", "port: [eno1, eno2]", "port: [eno1, bond0.200]", ifs + "[2].link-aggregation.port[1]", "bond0.200 is of type vlan", "", 36, 24},
		{"bond port is the bond", "port: [eno1, eno2]", "port: [eno1, bond0]", ifs + "[2].link-aggregation.port[1]", "lists itself", "", 36, 24},
		{"bond port twice", "port: [eno1, eno2]", "port: [eno1, eno1]", ifs + "[2].link-aggregation.port[1]", "eno1 listed twice", "", 36, 24},
		{"bond port and ports", "port: [eno1, eno2]", "port: [eno1]\n          ports: [eno2]", ifs + "[2].link-aggregation.ports", "same list", "keep one", 37, 18},
		{"bond port with an address", "mac-address: \"52:54:00:00:42:01\"", "mac-address: \"52:54:00:00:42:01\"\n        ipv4: {dhcp: true}", ifs + "[0].ipv4", "eno1 is a port of bond bond0", "enabled: false", 18, 15},
		{"bond mode unknown", "mode: 802.3ad", "mode: lacp", ifs + "[2].link-aggregation.mode", `"lacp" is not a bond mode`, "802.3ad", 31, 17},
		{"bond mode missing", "          mode: 802.3ad\n", "", ifs + "[2].link-aggregation.mode", "required for a new bond", "active-backup", 30, 9},
		{"bond option unknown", "lacp_rate: fast", "lacp_rat: fast", ifs + "[2].link-aggregation.options.lacp_rat", "not an nmstate bond option", `did you mean "lacp_rate"?`, 34, 23},
		{"bond option value", "lacp_rate: fast", "lacp_rate: quick", ifs + "[2].link-aggregation.options.lacp_rate", `"quick" is not one of slow, fast`, "", 34, 24},
		{"bond option range", "miimon: 100", "miimon: -1", ifs + "[2].link-aggregation.options.miimon", "not a whole number from 0 to 4294967295", "", 33, 21},
		{"bond miimon with ARP", "miimon: 100", "miimon: 100\n            arp_interval: 200\n            arp_ip_target: 192.168.100.1", ifs + "[2].link-aggregation.options.arp_interval", "cannot both be on", "arp_ip_target", 34, 27},
		{"bond actor multicast", "miimon: 100", "miimon: 100\n            ad_actor_system: \"01:00:5e:00:00:01\"", ifs + "[2].link-aggregation.options.ad_actor_system", "multicast", "02:00:00:00:00:01", 34, 30},
		{"bond primary not a port", "miimon: 100", "miimon: 100\n            primary: eno3", ifs + "[2].link-aggregation.options.primary", `"eno3" is not a port of this bond`, "", 34, 22},
		{"interface twice", "- name: eno2", "- name: eno1", ifs + "[1].name", `interface "eno1" listed twice`, "declare each interface once", 19, 15},
		{"IPv4 under ipv6", "ip: fd00:100::10", "ip: 192.168.100.11", ifs + "[3].ipv6.address[0].ip", "not an IPv6 address", "put it under ipv4", 55, 19},
		{"default gateway off the subnet", "next-hop-address: 192.168.100.1", "next-hop-address: 192.168.101.1", "spec.network.routes.config[0].next-hop-address", "192.168.101.1 is on none of bond0.100's ipv4 subnets", "prefix-length", 70, 29},
		{"IPv6 gateway off the subnet", "next-hop-address: fd00:100::1\n", "next-hop-address: fd00:101::1\n", "spec.network.routes.config[1].next-hop-address", "fd00:101::1 is on none of bond0.100's ipv6 subnets", "", 74, 29},
		{"route without interface", "          next-hop-interface: bond0.200\n", "", "spec.network.routes.config[2]", "needs next-hop-interface", "bond0.100", 77, 11},
		{"route through a family disabled", "fd00:100::1\n          next-hop-interface: bond0.100", "fd00:100::1\n          next-hop-interface: bond0.200", "spec.network.routes.config[1].next-hop-interface", "bond0.200 has ipv6 disabled", "", 75, 31},
		{"route through a bond port", "next-hop-interface: bond0.200", "next-hop-interface: eno1", "spec.network.routes.config[2].next-hop-interface", "eno1 has ipv4 disabled", "", 79, 31},
		{"route metric", "metric: 100\n        - destination: ::/0", "metric: -5\n        - destination: ::/0", "spec.network.routes.config[0].metric", "-5 is negative", "", 72, 19},
		{"autoconf under ipv4", "          dhcp: false\n          address:\n            - ip: 192.168.100.10", "          autoconf: true\n          address:\n            - ip: 192.168.100.10", ifs + "[3].ipv4.autoconf", "not allowed for IPv4", "ipv6", 46, 21},
		{"per-port bond settings", "port: [eno1, eno2]", "port: [eno1, eno2]\n          ports-config: []", ifs + "[2].link-aggregation.ports-config", "per-port bond settings not supported", "", 37, 11},
	}
	base := bondVLANDoc(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := edit(t, base, tc.old, tc.new)
			path := write(t, doc)
			_, err := Load(path)
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line != tc.line || p.Col != tc.col || !strings.Contains(p.Hint, tc.hint) || p.File != path {
						t.Errorf("got %v, want %d:%d and hint ...%s...", p, tc.line, tc.col, tc.hint)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
		})
	}
}

// What nmstate accepts loads: DHCP beside static addresses, a mode by its number, the
// ports alias, an IPv6 link-local gateway, a gateway behind DHCP, active-backup with
// miimon and a primary.
func TestNetworkAccepted(t *testing.T) {
	base := bondVLANDoc(t)
	for _, tc := range []struct{ name, old, new string }{
		{"the example", "", ""},
		{"dhcp beside static", "          dhcp: false\n          address:\n            - ip: 192.168.100.10", "          dhcp: true\n          address:\n            - ip: 192.168.100.10"},
		{"mode by number", "mode: 802.3ad", "mode: \"4\""},
		{"ports alias", "port: [eno1, eno2]", "ports: [eno1, eno2]"},
		{"active-backup", "mode: 802.3ad\n          options:\n            miimon: 100\n            lacp_rate: fast\n            xmit_hash_policy: layer3+4",
			"mode: active-backup\n          options:\n            miimon: \"100\"\n            primary: eno1\n            fail_over_mac: follow"},
		{"link-local IPv6 gateway", "next-hop-address: fd00:100::1\n", "next-hop-address: fe80::1\n"},
		{"gateway learned by DHCP", "        ipv4:\n          enabled: true\n          address:\n            - {ip: 10.200.0.10, prefix-length: 16}", "        ipv4: {enabled: true, dhcp: true}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := base
			if tc.old != "" {
				doc = edit(t, base, tc.old, tc.new)
			}
			if _, err := Load(write(t, doc)); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// A site with several mistakes hears of all of them at once, in file order.
func TestNetworkAllErrorsAtOnce(t *testing.T) {
	doc := bondVLANDoc(t)
	for _, e := range [][2]string{{"port: [eno1, eno2]", "port: [eno1, eno3]"}, {"id: 100\n", "id: 4095\n"}, {"next-hop-address: 192.168.100.1", "next-hop-address: 192.168.101.1"}} {
		doc = edit(t, doc, e[0], e[1])
	}
	ps := problems(t, func() error { _, err := Load(write(t, doc)); return err }())
	if len(ps) != 3 {
		t.Errorf("want 3 problems (port, VLAN ID, gateway), got\n%v", &strictyaml.ValidationErrors{Problems: ps})
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Line < ps[i-1].Line {
			t.Errorf("problems not in file order:\n%v", &strictyaml.ValidationErrors{Problems: ps})
		}
	}
}

// The same document as an ImageBasedConfig's networkConfig is checked alike, each problem
// at its place under networkConfig.
func TestImageBasedNetworkConfig(t *testing.T) {
	base := bondVLANDoc(t)
	start, end := strings.Index(base, "  network:\n")+len("  network:\n"), strings.Index(base, "  ntp:\n")
	var net strings.Builder
	for _, l := range strings.SplitAfter(base[start:end], "\n") {
		net.WriteString(strings.TrimPrefix(l, "  "))
	}
	ibi := "apiVersion: v1beta1\nkind: ImageBasedConfig\nmetadata:\n  name: store-0042\nhostname: sno-0042\nnetworkConfig:\n" + net.String()
	if _, err := Load(ibiDir(t, ibi, "")); err != nil {
		t.Fatalf("the bond and VLAN site as an ImageBasedConfig: %v", err)
	}
	bad := edit(t, edit(t, ibi, "id: 100\n", "id: 4095\n"), "port: [eno1, eno2]", "port: [eno1, eno3]")
	path := ibiDir(t, bad, "")
	_, err := Load(path)
	got := func() string {
		if err == nil {
			return ""
		}
		return err.Error()
	}()
	for _, w := range []string{
		filepath.Base(path) + `:30:22: networkConfig.interfaces[2].link-aggregation.port[1]: no interface "eno3"`,
		filepath.Base(path) + `:37:13: networkConfig.interfaces[3].vlan.id: 4095 is not a VLAN ID`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
}
