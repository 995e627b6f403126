package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// Conformance OS paths under the root.
const (
	CoreOSPullSecretFile = "/etc/containers/auth.json"
	CoreOSKeysFile       = "/root/.ssh/authorized_keys"
)

// coreosSteps apply the site config with what busybox provides (ip, udhcpc, hostname).
func (r *run) coreosSteps(_ *siteconfig.SiteConfig) []step {
	return []step{
		{steps.Step{Name: "container-storage", Argv: []string{"sgdisk"}, Changes: []string{ContainerStoragePath},
			Detail: "only with a separate " + ContainerStoragePath + " partition on a disk bigger than the seed: sgdisk (backup GPT to the end, the partition re-created to it), the kernel told (BLKPG), resize2fs"}, r.growExt4ContainerStorage},
		{steps.Step{Name: "network", Detail: "NetworkManager keyfiles for the whole nmstate document where NetworkManager runs (" + NMConnectionsDir + "), else busybox ip on each interface and route"}, r.coreosNetwork},
		{steps.Step{Name: "hostname", Changes: []string{"/etc/hostname"}}, r.coreosHostname},
		{steps.Step{Name: "dns", Changes: []string{"/etc/resolv.conf"}}, r.applyDNS},
		{steps.Step{Name: "ntp", Argv: []string{"systemctl", "try-restart", DebianChronyUnit}, Changes: []string{NTPServersFile, ChronySourcesFile},
			Detail: "chrony's site sources only where chrony reads " + ChronySourcesDir}, r.coreosNTP},
		{steps.Step{Name: StepPullSecret, Changes: []string{CoreOSPullSecretFile}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeSecretFile(sc, CoreOSPullSecretFile)
		}},
		{steps.Step{Name: "mirrors", Changes: []string{MirrorsFile}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeMirrors(sc)
		}},
		{steps.Step{Name: "proxy", Changes: []string{CoreOSProxyFile}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeProxyEnv(sc)
		}},
		{steps.Step{Name: "trust-bundle", Argv: []string{"update-ca-certificates"}, Changes: []string{DebianCAAnchorFile, "/etc/ssl/certs/"},
			Detail: "only when the site gives an additionalTrustBundle; update-ca-trust on " + UserCABundleFile + " where the node has it"}, r.coreosTrustBundle},
		{steps.Step{Name: "ssh-keys", Changes: []string{CoreOSKeysFile}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeKeys(sc, CoreOSKeysFile)
		}},
		{steps.Step{Name: "manifests", Changes: []string{ManifestsDir}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeManifests(sc)
		}},
		{steps.Step{Name: "node-labels", Changes: []string{NodeLabelsFile},
			Detail: "no Node object here: the labels OpenShift's node-labels step would patch onto it, recorded"}, r.coreosNodeLabels},
	}
}

// coreosNodeLabels records the site's node labels where a conformance check reads them
// (NodeLabelsFile), split as nodeLabelsStep splits them on OpenShift: the kubelet's own
// labels are left out and reported as ignored. Without labels the file is removed, so a
// node reconfigured again does not keep another site's.
func (r *run) coreosNodeLabels(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	labels, ignored := siteNodeLabels(sc)
	d := map[string]string{"ignored": strings.Join(ignored, ",")}
	if len(labels) == 0 {
		if err := os.Remove(under(r.o.Root, NodeLabelsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing %s: %w", NodeLabelsFile, err)
		}
		d["applied"] = "nothing: the site config has no node labels of its own"
		return d, nil
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "%s=%s\n", k, labels[k])
	}
	if _, err := r.writeUnder(NodeLabelsFile, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("recording the node labels: %w", err)
	}
	d["labels"] = strings.Join(slices.Sorted(maps.Keys(labels)), ",")
	d["file"] = NodeLabelsFile
	return d, nil
}

// coreosNetwork configures each interface and route with busybox ip, then reports the
// addresses the interfaces hold, so a test can check them from outside.
func (r *run) coreosNetwork(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	n := sc.Spec.Network
	if n == nil || len(n.Interfaces) == 0 {
		return map[string]string{"applied": "nothing: the site config has no interfaces"}, nil
	}
	if nm, err := r.hasNetworkManager(ctx); err != nil || nm {
		if err != nil {
			return nil, err
		}
		return r.nmNetwork(ctx, n)
	}
	// busybox ip cannot make a bond, and this node has no NetworkManager: refused before
	// anything changes.
	for _, iface := range n.Interfaces {
		if iface.Type != "ethernet" {
			return nil, fmt.Errorf("interface %s is a %s: the conformance OS configures ethernet interfaces with busybox ip only; bonds and VLANs need a node with NetworkManager (OpenShift, or the systemd conformance OS)", iface.Name, iface.Type)
		}
	}
	for _, iface := range n.Interfaces {
		if err := r.coreosInterface(ctx, iface); err != nil {
			return nil, fmt.Errorf("interface %s: %w", iface.Name, err)
		}
	}
	var routes []string
	if n.Routes != nil {
		for _, rt := range n.Routes.Config {
			if _, err := r.cmd(ctx, "ip", routeArgs(rt)...); err != nil {
				return nil, fmt.Errorf("route to %s: %w", rt.Destination, err)
			}
			routes = append(routes, rt.Destination+"->"+rt.NextHopAddress)
		}
	}
	d, err := r.addressReport(ctx, n)
	if err != nil {
		return nil, err
	}
	if len(routes) > 0 {
		d["routes"] = strings.Join(routes, ",")
	}
	return d, nil
}

func (r *run) coreosInterface(ctx context.Context, iface siteconfig.Interface) error {
	if iface.MACAddress != "" {
		if err := r.checkMAC(ctx, iface); err != nil {
			return err
		}
	}
	if iface.State == "down" {
		_, err := r.cmd(ctx, "ip", "link", "set", iface.Name, "down")
		return err
	}
	if iface.IPv6.IsEnabled() && iface.IPv6.IsDHCP() {
		return errors.New("ipv6 dhcp: the conformance OS has no DHCPv6 client (busybox udhcpc is IPv4 only); give static addresses")
	}
	// Flushing only global addresses keeps the IPv6 link-local one neighbour discovery needs.
	cmds := [][]string{
		{"link", "set", iface.Name, "up"},
		{"addr", "flush", "dev", iface.Name, "scope", "global"},
	}
	if iface.MTU != nil {
		cmds = append(cmds[:1], append([][]string{{"link", "set", "dev", iface.Name, "mtu", strconv.Itoa(*iface.MTU)}}, cmds[1:]...)...)
	}
	for _, c := range []*siteconfig.IPConfig{iface.IPv4, iface.IPv6} {
		if !c.IsEnabled() {
			continue
		}
		for _, a := range c.Address {
			cmds = append(cmds, []string{"addr", "add", a.IP + "/" + strconv.Itoa(a.PrefixLength), "dev", iface.Name})
		}
	}
	for _, c := range cmds {
		if _, err := r.cmd(ctx, "ip", c...); err != nil {
			return err
		}
	}
	if iface.IPv4.IsEnabled() && iface.IPv4.IsDHCP() {
		// -q: exit once leased; -n: fail instead of retrying in the background forever.
		if _, err := r.cmd(ctx, "udhcpc", "-i", iface.Name, "-q", "-n"); err != nil {
			return fmt.Errorf("dhcp: %w", err)
		}
	}
	return nil
}

// checkMAC refuses an interface whose hardware address is not the one the site config
// names (nmstate's mac-address): the config was written for another box, or the name.
func (r *run) checkMAC(ctx context.Context, iface siteconfig.Interface) error {
	out, err := r.cmd(ctx, "ip", "-o", "link", "show", "dev", iface.Name)
	if err != nil {
		return fmt.Errorf("reading the hardware address of %s: %w", iface.Name, err)
	}
	fields := strings.Fields(string(out))
	i := slices.Index(fields, "link/ether")
	if i < 0 || i+1 >= len(fields) {
		return fmt.Errorf("interface %s has no Ethernet address, but the site config names mac-address %s", iface.Name, iface.MACAddress)
	}
	if !strings.EqualFold(fields[i+1], iface.MACAddress) {
		return fmt.Errorf("interface %s has the hardware address %s, but the site config names mac-address %s: is this the site config for this box?", iface.Name, fields[i+1], iface.MACAddress)
	}
	return nil
}

// routeArgs is busybox ip's route command for rt; 0.0.0.0/0 and ::/0 are the default route.
func routeArgs(rt siteconfig.Route) []string {
	dst, _ := netip.ParsePrefix(rt.Destination) // validated when the site config was read
	args := []string{"route", "replace"}
	if dst.Addr().Is6() {
		args = []string{"-6", "route", "replace"}
	}
	if dst.Bits() == 0 {
		args = append(args, "default")
	} else {
		args = append(args, rt.Destination)
	}
	if rt.NextHopAddress != "" {
		args = append(args, "via", rt.NextHopAddress)
	}
	if rt.NextHopInterface != "" {
		args = append(args, "dev", rt.NextHopInterface)
	}
	if rt.Metric != nil {
		args = append(args, "metric", strconv.Itoa(*rt.Metric))
	}
	if rt.TableID != nil {
		args = append(args, "table", strconv.Itoa(*rt.TableID))
	}
	return args
}

// globalAddresses picks the global-scope addresses (CIDR) out of `ip -o addr show` output,
// whose lines read "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\ ...".
func globalAddresses(out []byte) []string {
	var addrs []string
	for _, a := range parseAddresses(out) {
		if a.scope == "global" {
			addrs = append(addrs, a.cidr)
		}
	}
	return addrs
}

type ifaceAddr struct{ cidr, scope string }

func parseAddresses(out []byte) []ifaceAddr {
	var addrs []ifaceAddr
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" && f[i] != "inet6" {
				continue
			}
			a := ifaceAddr{cidr: f[i+1]}
			for j := i + 2; j+1 < len(f); j++ {
				if f[j] == "scope" {
					a.scope = f[j+1]
					break
				}
			}
			addrs = append(addrs, a)
			break
		}
	}
	return addrs
}

func (r *run) coreosHostname(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	name := sc.Spec.Hostname
	if _, err := r.writeUnder("/etc/hostname", []byte(name+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing the host name: %w", err)
	}
	if _, err := r.cmd(ctx, "hostname", name); err != nil {
		return nil, err
	}
	return map[string]string{"hostname": name}, nil
}

func (r *run) writeNTPServers(sc *siteconfig.SiteConfig) (map[string]string, error) {
	if sc.Spec.NTP == nil || len(sc.Spec.NTP.Servers) == 0 {
		return map[string]string{"applied": "nothing: the site config has no NTP servers"}, nil
	}
	s := sc.Spec.NTP.Servers
	if _, err := r.writeUnder(NTPServersFile, []byte(strings.Join(s, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing the NTP servers: %w", err)
	}
	return map[string]string{"ntp.servers": strings.Join(s, ","), "file": NTPServersFile}, nil
}

// writeProxyEnv gives the conformance OS the site proxy the way RHCOS holds it: the MCO's
// environment file, HTTP_PROXY, HTTPS_PROXY and NO_PROXY, one line each when given
// (machine-config-operator templates/common/_base/files/etc-mco-proxy.yaml). The node has
// no cluster-wide proxy, so nothing recert would do applies: the file is what the node's
// own tools read. Mode 0600, not the MCO's 0644: a proxy URL may carry credentials. The
// step's report redacts them.
func (r *run) writeProxyEnv(sc *siteconfig.SiteConfig) (map[string]string, error) {
	p := sc.Spec.Proxy
	if p == nil {
		return map[string]string{"applied": "nothing: the site config has no proxy"}, nil
	}
	var b strings.Builder
	rep := map[string]string{"file": CoreOSProxyFile}
	for _, v := range []struct{ env, key, val string }{
		{"HTTP_PROXY", "httpProxy", p.HTTPProxy}, {"HTTPS_PROXY", "httpsProxy", p.HTTPSProxy}, {"NO_PROXY", "noProxy", p.NoProxy},
	} {
		if v.val != "" {
			fmt.Fprintf(&b, "%s=%s\n", v.env, v.val)
			rep[v.key] = siteconfig.RedactURL(v.val)
		}
	}
	if _, err := r.writeUnder(CoreOSProxyFile, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("writing the site proxy: %w", err)
	}
	return rep, nil
}
