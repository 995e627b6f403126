package reconfigure

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

func bondVLANSite(t *testing.T) *siteconfig.SiteConfig {
	t.Helper()
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "bond-vlan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// nmNode is a root with NetworkManager's keyfile directory holding the factory's
// profiles, answered by the nmcli stand-in, and the site's two NICs.
func nmNode(t *testing.T) (*run, *commands, *nmcli) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, NMConnectionsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Wired connection 1.nmconnection", "enp1s0.nmconnection"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("[connection]\nid="+strings.TrimSuffix(f, ".nmconnection")+"\ntype=802-3-ethernet\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	nm := &nmcli{}
	cmds := &commands{root: root, outputs: map[string]string{
		"ip -o link show dev eno1": "2: eno1: <BROADCAST,MULTICAST,UP> mtu 1500 qdisc pfifo_fast qlen 1000\\    link/ether 52:54:00:00:42:01 brd ff:ff:ff:ff:ff:ff",
		"ip -o link show dev eno2": "3: eno2: <BROADCAST,MULTICAST,UP> mtu 1500 qdisc pfifo_fast qlen 1000\\    link/ether 52:54:00:00:42:02 brd ff:ff:ff:ff:ff:ff",
		"ip -o addr show dev bond0.100": "6: bond0.100    inet 192.168.100.10/24 brd 192.168.100.255 scope global noprefixroute bond0.100\\       valid_lft forever preferred_lft forever\n" +
			"6: bond0.100    inet6 fd00:100::10/64 scope global noprefixroute \\       valid_lft forever preferred_lft forever\n",
	}, tools: map[string]tool{"nmcli": nm.run, "ip": busyboxIP}}
	return &run{o: Options{Root: root, Run: cmds.run}}, cmds, nm
}

// TestNMNetworkReplacesFactoryProfiles: on a node where NetworkManager runs, the hook
// writes the site's profiles 0600, removes the factory's, reloads and activates them all.
func TestNMNetworkReplacesFactoryProfiles(t *testing.T) {
	r, cmds, nm := nmNode(t)
	d, err := r.coreosNetwork(context.Background(), bondVLANSite(t))
	if err != nil {
		t.Fatalf("%v\ncommands:\n%s", err, strings.Join(cmds.lines, "\n"))
	}
	dir := filepath.Join(r.o.Root, NMConnectionsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o, NetworkManager wants 0600", e.Name(), fi.Mode().Perm())
		}
	}
	want := []string{"bond0.100.nmconnection", "bond0.200.nmconnection", "bond0.nmconnection", "eno1.nmconnection", "eno2.nmconnection"}
	if !slices.Equal(files, want) {
		t.Errorf("profiles on disk %v, want %v (the factory's removed)", files, want)
	}
	if want := []string{"bond0", "eno1", "eno2", "bond0.100", "bond0.200"}; !slices.Equal(nm.active, want) {
		t.Errorf("activated %v, want %v", nm.active, want)
	}
	if got := d["address.bond0.100"]; got != "192.168.100.10/24,fd00:100::10/64" {
		t.Errorf("reported address %q", got)
	}
	if got := d["networkmanager.removed"]; got != "Wired connection 1.nmconnection,enp1s0.nmconnection" {
		t.Errorf("reported removed %q", got)
	}
	if i, j := slices.Index(cmds.lines, "nmcli connection reload"), slices.Index(cmds.lines, "ip -o link show dev eno1"); j < 0 || i < j {
		t.Errorf("the MACs were not checked before the reload: %q", cmds.lines)
	}
}

// TestNMNetworkRefusesFirst: what nmstate's generator or NetworkManager cannot apply,
// and a site config for another box, is refused before any profile changes.
func TestNMNetworkRefusesFirst(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(n *siteconfig.Network)
	}{
		{"ipv6 autoconf alone", "ipv6 autoconf without dhcp", func(n *siteconfig.Network) {
			n.Interfaces[3].IPv6 = &siteconfig.IPConfig{Enabled: ptr(true), Autoconf: ptr(true), DHCP: ptr(false)}
		}},
		{"dns families interleaved", "mix the families", func(n *siteconfig.Network) {
			n.DNSResolver.Config.Server = []string{"192.168.100.1", "fd00:100::1", "192.168.100.2"}
		}},
		{"dns with no IPv6 interface", "no interface has IPv6 enabled", func(n *siteconfig.Network) {
			n.Interfaces[3].IPv6 = &siteconfig.IPConfig{Enabled: ptr(false)}
			n.Routes.Config = n.Routes.Config[:1]
		}},
		{"route via a port", "no interface with IP settings", func(n *siteconfig.Network) {
			n.Routes.Config[2].NextHopInterface = "eno1"
		}},
		{"another box", "hardware address 52:54:00:00:42:01", func(n *siteconfig.Network) {
			n.Interfaces[0].MACAddress = "52:54:00:99:99:99"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cmds, _ := nmNode(t)
			sc := bondVLANSite(t)
			tc.edit(sc.Spec.Network)
			_, err := r.coreosNetwork(context.Background(), sc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to say %q", err, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Join(r.o.Root, NMConnectionsDir))
			if len(ents) != 2 {
				t.Errorf("%d profiles after the refusal, want the factory's 2 untouched", len(ents))
			}
			for _, l := range cmds.lines {
				if strings.HasPrefix(l, "nmcli connection") {
					t.Errorf("ran %q before refusing", l)
				}
			}
		})
	}
}

// TestNMNetworkEnslavesPortsOnce: whether or not NetworkManager's autoconnect starts the
// new profiles at the reload, the hook activates no port itself and no controller that is
// already active, so each bond port is attached once (a second attach is a link flap).
func TestNMNetworkEnslavesPortsOnce(t *testing.T) {
	for _, autoconnect := range []bool{false, true} {
		t.Run(fmt.Sprintf("autoconnect=%v", autoconnect), func(t *testing.T) {
			r, cmds, nm := nmNode(t)
			nm.autoconnect = autoconnect
			if _, err := r.coreosNetwork(context.Background(), bondVLANSite(t)); err != nil {
				t.Fatalf("%v\ncommands:\n%s", err, strings.Join(cmds.lines, "\n"))
			}
			if want := map[string]int{"eno1": 1, "eno2": 1}; !maps.Equal(nm.enslaved, want) {
				t.Errorf("ports attached %v times, want once each; commands:\n%s", nm.enslaved, strings.Join(cmds.lines, "\n"))
			}
			for _, id := range []string{"bond0", "eno1", "eno2", "bond0.100", "bond0.200"} {
				if !slices.Contains(nm.active, id) {
					t.Errorf("%s not active: %v", id, nm.active)
				}
			}
			if n := strings.Count(strings.Join(cmds.lines, "\n"), "nmcli connection reload"); n != 1 {
				t.Errorf("reloaded %d times, want once", n)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestCoreOSNodeLabels: the conformance OS has no Node object, so its node-labels step
// records the labels OpenShift's would patch onto it (the kubelet's own left out), and a
// site without labels removes another site's record.
func TestCoreOSNodeLabels(t *testing.T) {
	r, _, _ := nmNode(t)
	sc := bondVLANSite(t)
	sc.Spec.NodeLabels["kubernetes.io/hostname"] = "other"
	d, err := r.coreosNodeLabels(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.o.Root, NodeLabelsFile))
	if want := "node-role.kubernetes.io/edge=\nsite.example.com/store=0042\n"; err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", NodeLabelsFile, b, err, want)
	}
	if d["labels"] != "node-role.kubernetes.io/edge,site.example.com/store" || d["ignored"] != "kubernetes.io/hostname" {
		t.Errorf("reported %v", d)
	}
	sc.Spec.NodeLabels = nil
	if d, err = r.coreosNodeLabels(context.Background(), sc); err != nil || d["applied"] == "" {
		t.Fatalf("without labels: %v, %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(r.o.Root, NodeLabelsFile)); !os.IsNotExist(err) {
		t.Errorf("%s kept after a site without labels: %v", NodeLabelsFile, err)
	}
}
