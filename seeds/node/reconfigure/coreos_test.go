package reconfigure

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// busyboxAddrShow is `busybox ip -o addr show dev ens3` on the conformance OS after the
// network step (busybox 1.35's one-line format).
const busyboxAddrShow = `2: ens3    inet 192.168.50.10/24 scope global ens3\       valid_lft forever preferred_lft forever
2: ens3    inet6 fd00:50::10/64 scope global \       valid_lft forever preferred_lft forever
2: ens3    inet6 fe80::5054:ff:fe12:3456/64 scope link \       valid_lft forever preferred_lft forever
`

// The conformance OS applies every step of the store site with busybox's command lines
// and writes each file under the root; each step's report carries what a test checks
// from outside.
func TestCoreOSSteps(t *testing.T) {
	h := newHarness(t)
	h.cmds.outputs["ip -o addr show dev ens3"] = busyboxAddrShow
	res, err := Run(context.Background(), h.options(oskind.CoreOS, medium(t, "site.yaml", nil)))
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
	}
	wantCmds := []string{
		"ip link set ens3 up",
		"ip addr flush dev ens3 scope global",
		"ip addr add 192.168.50.10/24 dev ens3",
		"ip addr add fd00:50::10/64 dev ens3",
		"ip route replace default via 192.168.50.1 dev ens3",
		"ip -o addr show dev ens3",
		"hostname sno-0042",
	}
	if !slices.Equal(h.cmds.lines, wantCmds) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(h.cmds.lines, "\n"), strings.Join(wantCmds, "\n"))
	}
	var names []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
	}
	if want := []string{"medium", "container-storage", "network", "hostname", "dns", "ntp", "pull-secret", "mirrors", "proxy", "trust-bundle", "ssh-keys", "manifests", "node-labels"}; !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	for _, tc := range []struct {
		step, key, want string
	}{
		{"network", "address.ens3", "192.168.50.10/24,fd00:50::10/64"},
		{"hostname", "hostname", "sno-0042"},
		{"dns", "dns.servers", "192.168.50.1"},
		{"ntp", "ntp.servers", "192.168.50.1,ntp.example.com"},
		{"mirrors", "mirrors", "quay.io/openshift-release-dev/ocp-release=registry.store-0042.example:5000/ocp-release"},
		{"manifests", "manifests", "store-id.yaml"},
	} {
		m, ok := h.rep.step(tc.step, wire.StatusOK)
		if !ok || m.Details[tc.key] != tc.want {
			t.Errorf("step %s reported %v, want %s=%s", tc.step, m.Details, tc.key, tc.want)
		}
	}
	for _, tc := range []struct {
		path, contains string
		mode           os.FileMode
	}{
		{"/etc/hostname", "sno-0042\n", 0o644},
		{"/etc/resolv.conf", "nameserver 192.168.50.1\nsearch edge.example.com\n", 0o644},
		{NTPServersFile, "192.168.50.1\nntp.example.com\n", 0o644},
		{CoreOSPullSecretFile, `"auth":"c2l0ZTpTSVRFU0VDUkVU"`, 0o600},
		{CoreOSKeysFile, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIODF03UkqPpRumOkBMwrio+Z7FngBoww1Gpz0SCZN8LI tech@depot\n", 0o600},
		{ManifestsDir + "/store-id.yaml", "name: store-id", 0o600},
		{DoneFile, res.SiteDigest, 0o644},
	} {
		fi, err := os.Stat(filepath.Join(h.root, tc.path))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if got := h.read(t, tc.path); !strings.Contains(got, tc.contains) || fi.Mode().Perm() != tc.mode {
			t.Errorf("%s (mode %v) = %q, want mode %v containing %q", tc.path, fi.Mode().Perm(), got, tc.mode, tc.contains)
		}
	}
	if b, _ := os.ReadFile(h.resolv); !strings.Contains(string(b), "nameserver 192.168.50.1\n") {
		t.Errorf("the running system's resolv.conf = %q", b)
	}
	if f := h.rep.final(); f.Phase != wire.PhaseReconfigured || f.Status != wire.StatusOK {
		t.Errorf("final message %+v", f)
	}
}

// Each interface shape gives busybox's exact command lines.
func TestCoreOSInterfaceCommands(t *testing.T) {
	off, yes, mtu := false, true, 9000
	for _, tc := range []struct {
		name  string
		iface siteconfig.Interface
		want  []string
		err   string
	}{
		{"dhcp", siteconfig.Interface{Name: "eth0", IPv4: &siteconfig.IPConfig{DHCP: &yes}},
			[]string{"ip link set eth0 up", "ip addr flush dev eth0 scope global", "udhcpc -i eth0 -q -n"}, ""},
		{"down", siteconfig.Interface{Name: "eth1", State: "down", IPv4: &siteconfig.IPConfig{DHCP: &yes}},
			[]string{"ip link set eth1 down"}, ""},
		{"ipv4 disabled", siteconfig.Interface{Name: "eth2", IPv4: &siteconfig.IPConfig{Enabled: &off},
			IPv6: &siteconfig.IPConfig{Address: []siteconfig.Address{{IP: "fd00::2", PrefixLength: 64}}}},
			[]string{"ip link set eth2 up", "ip addr flush dev eth2 scope global", "ip addr add fd00::2/64 dev eth2"}, ""},
		{"dhcpv6", siteconfig.Interface{Name: "eth3", IPv6: &siteconfig.IPConfig{DHCP: &yes}}, nil, "no DHCPv6 client"},
		{"mtu", siteconfig.Interface{Name: "eth6", MTU: &mtu, IPv4: &siteconfig.IPConfig{Address: []siteconfig.Address{{IP: "10.0.0.6", PrefixLength: 24}}}},
			[]string{"ip link set eth6 up", "ip link set dev eth6 mtu 9000", "ip addr flush dev eth6 scope global", "ip addr add 10.0.0.6/24 dev eth6"}, ""},
		{"matching mac", siteconfig.Interface{Name: "eth4", MACAddress: "52:54:00:AB:CD:04", IPv4: &siteconfig.IPConfig{DHCP: &yes}},
			[]string{"ip -o link show dev eth4", "ip link set eth4 up", "ip addr flush dev eth4 scope global", "udhcpc -i eth4 -q -n"}, ""},
		{"other mac", siteconfig.Interface{Name: "eth5", MACAddress: "52:54:00:ab:cd:99", IPv4: &siteconfig.IPConfig{DHCP: &yes}},
			nil, "interface eth5 has the hardware address 52:54:00:ab:cd:05, but the site config names mac-address 52:54:00:ab:cd:99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// busybox ip's one-line link output, as on the conformance OS
			cmds := &commands{outputs: map[string]string{
				"ip -o link show dev eth4": "2: eth4: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc pfifo_fast qlen 1000\\    link/ether 52:54:00:ab:cd:04 brd ff:ff:ff:ff:ff:ff",
				"ip -o link show dev eth5": "3: eth5: <BROADCAST,MULTICAST> mtu 1500 qdisc noop qlen 1000\\    link/ether 52:54:00:ab:cd:05 brd ff:ff:ff:ff:ff:ff",
			}}
			r := &run{o: Options{Run: cmds.run}}
			err := r.coreosInterface(context.Background(), tc.iface)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(cmds.lines, tc.want) {
				t.Errorf("err %v, commands %q, want %q", err, cmds.lines, tc.want)
			}
		})
	}
}

func TestRouteArgs(t *testing.T) {
	metric, table := 100, 200
	for _, tc := range []struct {
		route siteconfig.Route
		want  string
	}{
		{siteconfig.Route{Destination: "0.0.0.0/0", NextHopAddress: "10.0.0.1", NextHopInterface: "eth0"}, "route replace default via 10.0.0.1 dev eth0"},
		{siteconfig.Route{Destination: "10.8.0.0/16", NextHopAddress: "10.0.0.254"}, "route replace 10.8.0.0/16 via 10.0.0.254"},
		{siteconfig.Route{Destination: "::/0", NextHopAddress: "fd00::1", NextHopInterface: "eth0"}, "-6 route replace default via fd00::1 dev eth0"},
		{siteconfig.Route{Destination: "192.168.9.0/24", NextHopInterface: "eth1"}, "route replace 192.168.9.0/24 dev eth1"},
		{siteconfig.Route{Destination: "10.50.0.0/16", NextHopAddress: "10.0.0.1", NextHopInterface: "eth0", Metric: &metric, TableID: &table}, "route replace 10.50.0.0/16 via 10.0.0.1 dev eth0 metric 100 table 200"},
	} {
		if got := strings.Join(routeArgs(tc.route), " "); got != tc.want {
			t.Errorf("%+v: ip %s, want ip %s", tc.route, got, tc.want)
		}
	}
}

// The address parser reads real busybox output (the loopback's, here) and the recorded
// conformance OS output.
func TestParseAddresses(t *testing.T) {
	if bb, err := exec.LookPath("busybox"); err == nil {
		out, err := exec.Command(bb, "ip", "-o", "addr", "show", "dev", "lo").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := parseAddresses(out); !slices.Contains(got, ifaceAddr{"127.0.0.1/8", "host"}) {
			t.Errorf("busybox lo: %v from %q", got, out)
		}
	}
	if got := globalAddresses([]byte(busyboxAddrShow)); !slices.Equal(got, []string{"192.168.50.10/24", "fd00:50::10/64"}) {
		t.Errorf("global addresses %v", got)
	}
}

// The mirrors drop-in is read by containers/image as CRI-O and podman read it: a pull by
// digest from the source goes to the mirror first.
func TestRegistriesConfParsedByContainersImage(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "registries.conf")
	os.WriteFile(main, []byte("unqualified-search-registries = []\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "registries.conf.d"), 0o755)
	mirrors := []siteconfig.RegistryMirror{{Source: "quay.io/openshift-release-dev/ocp-release",
		Mirrors: []string{"registry.site.example:5000/ocp-release", "backup.site.example/ocp"}}}
	os.WriteFile(filepath.Join(dir, "registries.conf.d", filepath.Base(MirrorsFile)), registriesConf(mirrors), 0o644)
	sys := &types.SystemContext{SystemRegistriesConfPath: main, SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d")}
	reg, err := sysregistriesv2.FindRegistry(sys, "quay.io/openshift-release-dev/ocp-release@sha256:"+strings.Repeat("a", 64))
	if err != nil || reg == nil {
		t.Fatalf("registry %v, err %v", reg, err)
	}
	ref, _ := reference.ParseNamed("quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64))
	srcs, err := reg.PullSourcesFromReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range srcs {
		got = append(got, s.Endpoint.Location)
	}
	want := []string{"registry.site.example:5000/ocp-release", "backup.site.example/ocp", "quay.io/openshift-release-dev/ocp-release"}
	if !slices.Equal(got, want) {
		t.Errorf("pull sources %v, want %v", got, want)
	}
	tagged, _ := reference.ParseNamed("quay.io/openshift-release-dev/ocp-release:4.18")
	if srcs, _ := reg.PullSourcesFromReference(tagged); len(srcs) != 1 {
		t.Errorf("a pull by tag uses %d sources, want the source only (digest-only mirrors)", len(srcs))
	}
}

// The pull secret appears in no report, console line, command line or file other than
// its own, on either target, even when a step fails quoting it.
func TestPullSecretNeverShown(t *testing.T) {
	const secret = `{"auths":{"registry.store-0042.example:5000":{"auth":"c2l0ZTpTSVRFU0VDUkVU"}}}`
	for _, kind := range oskind.All() {
		t.Run(string(kind), func(t *testing.T) {
			h := newHarness(t)
			if kind.IsOpenShift() {
				openshiftNode(t, h)
			}
			// A command whose error quotes the secret's token must not leak it either.
			h.cmds.failOn = "ip -o addr show"
			if kind.IsOpenShift() {
				h.cmds.failOn = "podman run --rm --replace --name snofactory-recert "
			}
			o := h.options(kind, medium(t, "site.yaml", nil))
			o.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
				out, err := h.cmds.run(ctx, name, args...)
				if err != nil {
					err = errors.New("failed near c2l0ZTpTSVRFU0VDUkVU")
				}
				return out, err
			}
			_, err := Run(context.Background(), o)
			if err == nil {
				t.Fatal("the injected failure did not fail the run")
			}
			msgs, _ := json.Marshal(h.rep.msgs)
			for what, b := range map[string]string{"messages": string(msgs), "console": h.console.String(),
				"commands": strings.Join(h.cmds.lines, "\n")} {
				for _, s := range []string{secret, "c2l0ZTpTSVRFU0VDUkVU"} {
					if strings.Contains(b, s) {
						t.Errorf("the %s hold the pull secret (%q)", what, s)
					}
				}
			}
			if !strings.Contains(string(msgs), "redacted") {
				t.Errorf("the failure quoting the token was not reported redacted: %s", msgs)
			}
		})
	}
}

// A bond or a VLAN is refused on the conformance OS before any interface changes: busybox
// ip cannot make a bond.
func TestCoreOSRefusesBondsFirst(t *testing.T) {
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "bond-vlan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := &commands{outputs: map[string]string{}}
	// A root without NetworkManager's keyfile directory: the busybox conformance OS.
	r := &run{o: Options{Root: t.TempDir(), Run: cmds.run}}
	if _, err := r.coreosNetwork(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "interface bond0 is a bond") {
		t.Errorf("err %v, want the bond refused", err)
	}
	if len(cmds.lines) > 0 {
		t.Errorf("ran %q before refusing", cmds.lines)
	}
}

// The conformance OS has no cluster-wide proxy: the site's goes where RHCOS's node tools
// read it, the MCO's /etc/mco/proxy.env, in the MCO template's lines; credentials stay out
// of the step's report and the console.
func TestCoreOSProxy(t *testing.T) {
	h := newHarness(t)
	h.cmds.outputs["ip -o addr show dev ens3"] = busyboxAddrShow
	const secret = "s3cret-proxy-pass"
	site := medium(t, "site.yaml", func(sc *siteconfig.SiteConfig) {
		sc.Spec.Proxy = &siteconfig.Proxy{HTTPProxy: "http://depot:" + secret + "@proxy.store.example:3128", NoProxy: ".store.example,10.0.0.0/8"}
	})
	if _, err := Run(context.Background(), h.options(oskind.CoreOS, site)); err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
	}
	want := "HTTP_PROXY=http://depot:" + secret + "@proxy.store.example:3128\nNO_PROXY=.store.example,10.0.0.0/8\n"
	fi, err := os.Stat(filepath.Join(h.root, CoreOSProxyFile))
	if err != nil || h.read(t, CoreOSProxyFile) != want || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s = %q (%v, %v), want %q mode 0600", CoreOSProxyFile, h.read(t, CoreOSProxyFile), fi, err, want)
	}
	m, ok := h.rep.step("proxy", wire.StatusOK)
	if !ok || m.Details["httpProxy"] != "http://<credentials>@proxy.store.example:3128" || m.Details["noProxy"] != ".store.example,10.0.0.0/8" {
		t.Errorf("proxy step reported %v", m.Details)
	}
	b, _ := json.Marshal(h.rep.msgs)
	if strings.Contains(string(b), secret) || strings.Contains(h.console.String(), secret) {
		t.Error("the proxy password reached a report or the console")
	}
}
