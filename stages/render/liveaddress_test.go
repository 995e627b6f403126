package render

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v32types "github.com/coreos/ignition/v2/config/v3_2/types"
	"github.com/vincent-petithory/dataurl"
)

// systemdUnit is a unit file as systemd reads it: section -> key -> values, list settings
// split on whitespace and accumulated over repeated keys.
func systemdUnit(t *testing.T, text string) map[string]map[string][]string {
	t.Helper()
	u := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %q is not KEY=VALUE inside a section", line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.Fields(v)...)
		}
	}
	return u
}

// The rendered live config (the installer stand-in's bootstrap-in-place config with render's
// additions) carries the address unit: it parses with Ignition's own 3.2 parser and Debian's
// ignition-validate, its script is the one the installed system's dispatcher runs, for the
// relocation address, and the unit runs after the network is online and before the
// installer's units that render and start etcd, which the same config must have.
func TestLiveConfigAddsRelocationAddress(t *testing.T) {
	o := clusterOptions(t)
	out := renderTo(t, o)
	cfgPath := filepath.Join(out, ConfigPath)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, r, err := v32.Parse(raw)
	if err != nil {
		t.Fatalf("config.ign: %v\n%s", err, r)
	}
	ignitionValidateAllowing(t, cfgPath, "has no install section")
	p := netip.MustParsePrefix(o.Relocation.InternalIP)
	if got := liveFile(t, cfg, LiveAddressScript); got != internalIPScript(p) {
		t.Errorf("%s in config.ign:\n%s\nwant the installed system's script for %s:\n%s", LiveAddressScript, got, p, internalIPScript(p))
	}
	units := map[string]string{}
	enabled := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		if u.Contents != nil {
			units[u.Name] = *u.Contents
		}
		enabled[u.Name] = u.Enabled != nil && *u.Enabled
	}
	text, ok := units[LiveAddressUnit]
	if !ok || !enabled[LiveAddressUnit] {
		t.Fatalf("config.ign has no enabled %s (units %v)", LiveAddressUnit, slices.Sorted(mapKeys(units)))
	}
	unit := systemdUnit(t, text)
	for _, want := range []struct{ section, key, value string }{
		{"Unit", "Wants", "network-online.target"},
		{"Unit", "After", "network-online.target"},
		// bootkube.sh renders etcd (cluster-etcd-operator render, installer
		// data/data/bootstrap/files/usr/local/bin/bootkube.sh.template); the bootstrap
		// kubelet runs the etcd pod it renders.
		{"Unit", "Before", "bootkube.service"},
		{"Unit", "Before", "kubelet.service"},
		{"Service", "Type", "oneshot"},
		{"Service", "ExecStart", LiveAddressScript},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if !slices.Contains(unit[want.section][want.key], want.value) {
			t.Errorf("%s: [%s] %s = %v, want %s\n%s", LiveAddressUnit, want.section, want.key, unit[want.section][want.key], want.value, text)
		}
	}
	// The units it is ordered before are the installer's, in this config: a name that
	// matched none would order nothing.
	if bk := systemdUnit(t, units["bootkube.service"]); !slices.Contains(bk["Service"]["ExecStart"], "/usr/local/bin/bootkube.sh") {
		t.Errorf("the installer's bootkube.service does not run bootkube.sh: %q", units["bootkube.service"])
	}
	if _, ok := units["kubelet.service"]; !ok {
		t.Error("the installer's config has no kubelet.service")
	}
	// render.json records the final size of config.ign.
	var rep Report
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Ignition {
		if f.Path == ConfigPath && f.Size != len(raw) {
			t.Errorf("render.json says config.ign has %d bytes, it has %d", f.Size, len(raw))
		}
	}
}

// The live config is assembled before it is written: when the installer's config already
// has the address script (so render refuses to add its own), render fails and leaves no
// config.ign, rather than one with the phase units and without the address the bootstrap etcd
// must take. The installer is the stand-in, run by a wrapper that adds that file to the
// bootstrap-in-place config it writes.
func TestLiveConfigWrittenWhole(t *testing.T) {
	o := clusterOptions(t)
	wrapper := filepath.Join(t.TempDir(), "openshift-install")
	// create single-node-ignition-config --dir D: $2 is the asset, $4 the directory.
	script := `#!/bin/sh
set -e
OPENSHIFT_INSTALL_STANDIN_ARGV0="$0" "` + o.InstallerPath + `" "$@"
[ "$1 $2" = "create single-node-ignition-config" ] || exit 0
sed -i 's|"files":\[|"files":[{"path":"` + LiveAddressScript + `","mode":493},|' "$4/` + installerIgnition + `"
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o.InstallerPath = wrapper
	out := t.TempDir()
	err := Render(context.Background(), o, testSecrets(t), out, testLog(t))
	if err == nil || !strings.Contains(err.Error(), LiveAddressScript) {
		t.Fatalf("Render over an installer config that has %s: %v", LiveAddressScript, err)
	}
	if _, err := os.Stat(filepath.Join(out, ConfigPath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was written although the live system's units were refused (stat: %v)", ConfigPath, err)
	}
}

// liveFile is the content of the file at path in cfg, decompressed; "" when absent.
func liveFile(t *testing.T, cfg v32types.Config, path string) string {
	t.Helper()
	for _, f := range cfg.Storage.Files {
		if f.Path != path || f.Contents.Source == nil {
			continue
		}
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			t.Fatal(err)
		}
		if f.Contents.Compression == nil || *f.Contents.Compression == "" {
			return string(d.Data)
		}
		if *f.Contents.Compression != "gzip" {
			t.Fatalf("%s: compression %q", path, *f.Contents.Compression)
		}
		zr, err := gzip.NewReader(bytes.NewReader(d.Data))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return ""
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The live unit is added only where the bootstrap etcd will take the relocation address:
// cluster-etcd-operator keeps the first machine network of the primary family (the first
// service network's; pkg/cmd/render/render.go getMachineCIDR, preferIPv6), and the first
// address inside it wins (bootstrap_ip.go getBootstrapIP).
func TestBootstrapAddress(t *testing.T) {
	for _, tc := range []struct {
		name             string
		machine, service []string
		internal         string
		err              string // "" for accepted
	}{
		{"defaulted to the relocation subnet", []string{"192.168.127.0/24"}, nil, "192.168.127.10/24", ""},
		{"a wider network", []string{"192.168.0.0/16"}, nil, "192.168.127.10/24", ""},
		{"an IPv6 network listed first does not count for IPv4", []string{"fd00::/64", "192.168.127.0/24"}, nil, "192.168.127.10/24", ""},
		{"IPv6 single stack", []string{"fd00:127::/64"}, []string{"fd02::/112"}, "fd00:127::10/64", ""},
		{"only a later network contains it", []string{"192.168.1.0/24", "192.168.127.0/24"}, nil, "192.168.127.10/24",
			"machineNetwork[0] 192.168.1.0/24, the first machine network of its family, does not contain the internal node address 192.168.127.10: the bootstrap etcd takes its address from that network alone; list 192.168.127.0/24 first"},
		{"the installer's default network holds the factory VM's address", nil, nil, "10.0.9.10/16",
			"machineNetwork[0] 10.0.0.0/16 contains the factory VM's own address 10.0.2.15"},
		{"other family than the service network", []string{"fd00:127::/64", "192.168.127.0/24"}, []string{"fd02::/112"}, "192.168.127.10/24",
			"relocation.internalIP: internal node address 192.168.127.10/24 is not of the cluster's primary family (the first service network, fd02::/112)"},
		{"no machine network of its family", []string{"192.168.127.0/24"}, nil, "fd00:127::10/64",
			"is not of the cluster's primary family"},
		{"no IPv6 machine network", []string{"192.168.127.0/24"}, []string{"fd02::/112"}, "fd00:127::10/64",
			"no machine network of the internal node address fd00:127::10/64's family; add fd00:127::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goodCluster()
			c.MachineNetwork, c.ServiceNetwork = tc.machine, tc.service
			p, err := bootstrapAddress(c, Relocation{InternalIP: tc.internal})
			if tc.err == "" {
				if err != nil || p.String() != tc.internal {
					t.Fatalf("bootstrapAddress = %v, %v; want %s", p, err, tc.internal)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("bootstrapAddress error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// fakeIP is a stand-in for iproute2's ip that keeps a node's addresses and routes in files
// under its state directory, answering in the real tool's formats:
//   - ip -4|-6 route show default: one line per route, "default via GW dev DEV proto dhcp
//     src ADDR metric N " (ip/iproute.c print_route); a multipath route prints no dev on its
//     own line and one "\tnexthop via GW dev DEV weight 1 " line per path; routes of the
//     other family are not listed.
//   - ip -o addr show dev DEV: one line per address, "IDX: DEV    inet ADDR/LEN brd B scope
//     global [secondary ]DEV\       valid_lft ..." (ip/ipaddress.c print_addrinfo with -o:
//     no link line, continuation lines joined with a backslash); inet6 lines carry no brd
//     and no label. An unknown device: `Device "DEV" does not exist.` on stderr, exit 1.
//   - ip addr add ADDR dev DEV: the kernel's EEXIST for an address the device has
//     ("RTNETLINK answers: File exists", exit 2; ip/ipaddress.c ipaddr_modify).
//
// Any other call is recorded in unexpected and fails with status 1.
const fakeIP = `#!/bin/sh
st=${FAKE_IP_STATE:?}
echo "$*" >>"$st/calls"
case "$*" in
"-4 route show default") cat "$st/routes4" 2>/dev/null; exit 0 ;;
"-6 route show default") cat "$st/routes6" 2>/dev/null; exit 0 ;;
"-o addr show dev "*)
	dev=$5
	grep -q "^$dev " "$st/links" || { echo "Device \"$dev\" does not exist." >&2; exit 1; }
	idx=$(awk -v d="$dev" '$1 == d { print $2 }' "$st/links")
	hide=
	if [ -e "$st/race" ]; then hide=$(cat "$st/race"); rm -f "$st/race"; fi
	awk -v d="$dev" -v i="$idx" -v hide="$hide" '$1 == d && $2 != hide {
		fam = ($2 ~ /:/) ? "inet6" : "inet"
		brd = ($3 != "-" && fam == "inet") ? "brd " $3 " " : ""
		scope = ($2 ~ /^fe80:/) ? "link" : "global"
		flags = ""; for (j = 4; j <= NF; j++) flags = flags $j " "
		label = (fam == "inet") ? d : ""
		printf "%s: %s    %s %s %sscope %s %s%s\\       valid_lft forever preferred_lft forever\n", i, d, fam, $2, brd, scope, flags, label
	}' "$st/addrs"
	exit 0 ;;
"addr add "*" dev "*)
	addr=$3 dev=$5
	grep -q "^$dev " "$st/links" || { echo "Cannot find device \"$dev\"" >&2; exit 1; }
	if awk -v d="$dev" -v a="$addr" '$1 == d && $2 == a { f = 1 } END { exit !f }' "$st/addrs"; then
		echo "RTNETLINK answers: File exists" >&2; exit 2
	fi
	echo "$dev $addr - secondary" >>"$st/addrs"
	echo "$dev $addr" >>"$st/added"
	exit 0 ;;
esac
echo "$*" >>"$st/unexpected"
exit 1
`

// ipNode is the node the fake ip answers for.
type ipNode struct {
	links          []string // name, in index order from 2
	addrs          []string // "DEV ADDR/LEN BRD FLAG...", BRD "-" for none
	routes4        string
	routes6        string
	race           string // an address the first listing leaves out, as if added by a concurrent run
	dispatcherArgs []string
}

// runScript runs script with the fake ip first on PATH (the real tool is never reached),
// under shell, twice, and returns each run's exit status and stderr, and what ip added.
func runScript(t *testing.T, shell, script string, n ipNode) (codes []int, stderr []string, added []string) {
	t.Helper()
	dir := t.TempDir()
	bin, st := filepath.Join(dir, "bin"), filepath.Join(dir, "state")
	for _, d := range []string{bin, st} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "ip"), fakeIP, 0o755)
	write(filepath.Join(dir, "script"), script, 0o755)
	var links strings.Builder
	for i, l := range append([]string{"lo"}, n.links...) {
		links.WriteString(l + " " + string(rune('1'+i)) + "\n")
	}
	write(filepath.Join(st, "links"), links.String(), 0o644)
	write(filepath.Join(st, "addrs"), strings.Join(append([]string{"lo 127.0.0.1/8 -"}, n.addrs...), "\n")+"\n", 0o644)
	write(filepath.Join(st, "routes4"), n.routes4, 0o644)
	write(filepath.Join(st, "routes6"), n.routes6, 0o644)
	if n.race != "" {
		write(filepath.Join(st, "race"), n.race, 0o644)
	}
	for range 2 {
		cmd := exec.Command(shell, append([]string{filepath.Join(dir, "script")}, n.dispatcherArgs...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_IP_STATE="+st)
		var errb strings.Builder
		cmd.Stderr = &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		codes, stderr = append(codes, code), append(stderr, errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(st, "unexpected")); len(b) > 0 {
		t.Errorf("the script called ip in ways the stand-in does not know:\n%s", b)
	}
	b, _ := os.ReadFile(filepath.Join(st, "added"))
	return codes, stderr, strings.Fields(strings.ReplaceAll(string(b), "\n", " "))
}

// The address script, run twice as the live unit runs it and as NetworkManager runs the
// dispatcher copy, under dash and bash (RHCOS's /bin/sh): it adds the address once, to the
// default route's interface or to br-ex, leaves it alone when present (even when a
// concurrent run added it between its check and its add), and says what is wrong when
// there is no default route.
func TestInternalIPScript(t *testing.T) {
	dhcp := "ens3 10.0.2.15/24 10.0.2.255 dynamic noprefixroute"
	ll := "ens3 fe80::5054:ff:fe12:3456/64 - noprefixroute"
	twoDefaults := "default via 10.0.2.2 dev ens3 proto dhcp src 10.0.2.15 metric 100 \n" +
		"default via 192.168.122.1 dev ens4 proto dhcp src 192.168.122.5 metric 101 \n"
	v4 := netip.MustParsePrefix("192.168.127.10/24")
	v6 := netip.MustParsePrefix("fd00:127::10/64")
	for _, tc := range []struct {
		name     string
		p        netip.Prefix
		node     ipNode
		added    []string // DEV ADDR pairs
		failWith string   // stderr of a failing run; "" when both runs succeed
	}{
		{name: "live: the first default route's interface", p: v4,
			node:  ipNode{links: []string{"ens3", "ens4"}, addrs: []string{dhcp, ll, "ens4 192.168.122.5/24 192.168.122.255 dynamic "}, routes4: twoDefaults},
			added: []string{"ens3", "192.168.127.10/24"}},
		{name: "live: a multipath default route", p: v4,
			node: ipNode{links: []string{"ens3", "ens4"}, addrs: []string{dhcp}, routes4: "default proto static metric 100 \n" +
				"\tnexthop via 10.0.2.2 dev ens4 weight 1 \n\tnexthop via 10.0.3.2 dev ens3 weight 1 \n"},
			added: []string{"ens4", "192.168.127.10/24"}},
		{name: "live: already there", p: v4,
			node: ipNode{links: []string{"ens3"}, addrs: []string{dhcp, "ens3 192.168.127.10/24 192.168.127.255 secondary "}, routes4: twoDefaults}},
		{name: "live: a concurrent run added it first", p: v4,
			node: ipNode{links: []string{"ens3"}, addrs: []string{dhcp, "ens3 192.168.127.10/24 192.168.127.255 secondary "}, routes4: twoDefaults, race: "192.168.127.10/24"}},
		{name: "live: a longer prefix of the address is another address", p: v4,
			node:  ipNode{links: []string{"ens3"}, addrs: []string{dhcp, "ens3 192.168.127.10/32 - secondary"}, routes4: twoDefaults},
			added: []string{"ens3", "192.168.127.10/24"}},
		{name: "live: IPv6 takes the IPv6 default route", p: v6,
			node: ipNode{links: []string{"ens3", "ens4"}, addrs: []string{dhcp, ll}, routes4: "default via 10.0.2.2 dev ens4 proto dhcp src 10.0.2.15 metric 100 \n",
				routes6: "default via fe80::2 dev ens3 proto ra metric 100 pref medium\n"},
			added: []string{"ens3", "fd00:127::10/64"}},
		{name: "live: no default route", p: v4,
			node:     ipNode{links: []string{"ens3"}, addrs: []string{dhcp}},
			failWith: "snofactory-internal-ip: no IPv4 default route: nowhere to add 192.168.127.10/24"},
		{name: "dispatcher: br-ex up", p: v4,
			node:  ipNode{links: []string{"ens3", "br-ex"}, addrs: []string{"br-ex 10.0.2.15/24 10.0.2.255 dynamic noprefixroute "}, routes4: twoDefaults, dispatcherArgs: []string{"br-ex", "up"}},
			added: []string{"br-ex", "192.168.127.10/24"}},
		{name: "dispatcher: br-ex pre-up", p: v4,
			node:  ipNode{links: []string{"br-ex"}, dispatcherArgs: []string{"br-ex", "pre-up"}},
			added: []string{"br-ex", "192.168.127.10/24"}},
		{name: "dispatcher: another interface", p: v4,
			node: ipNode{links: []string{"ens3", "br-ex"}, routes4: twoDefaults, dispatcherArgs: []string{"ens3", "up"}}},
		{name: "dispatcher: br-ex down", p: v4,
			node: ipNode{links: []string{"br-ex"}, routes4: twoDefaults, dispatcherArgs: []string{"br-ex", "down"}}},
		{name: "dispatcher: hostname change", p: v4,
			node: ipNode{links: []string{"br-ex"}, routes4: twoDefaults, dispatcherArgs: []string{"none", "hostname"}}},
	} {
		for _, shell := range []string{"/bin/sh", "bash"} {
			t.Run(tc.name+"/"+filepath.Base(shell), func(t *testing.T) {
				if _, err := exec.LookPath(shell); err != nil {
					t.Skipf("%s: %v", shell, err)
				}
				codes, stderr, added := runScript(t, shell, internalIPScript(tc.p), tc.node)
				if tc.failWith != "" {
					for i := range codes {
						if codes[i] == 0 || !strings.Contains(stderr[i], tc.failWith) {
							t.Errorf("run %d: exit %d, stderr %q; want a failure saying %q", i+1, codes[i], stderr[i], tc.failWith)
						}
					}
				} else if !slices.Equal(codes, []int{0, 0}) {
					t.Errorf("exit statuses %v, stderr %q; want both 0", codes, stderr)
				}
				if !slices.Equal(added, tc.added) {
					t.Errorf("ip added %v over two runs, want %v", added, tc.added)
				}
			})
		}
	}
}
