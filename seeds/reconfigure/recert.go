package reconfigure

import (
	"net/netip"
	"strings"
)

// Identity is what names a cluster and its node.
type Identity struct {
	ClusterName, BaseDomain, Hostname string
	// IPs are the node's addresses, IPv4 first.
	IPs []string
}

// RecertParams is one recert run: what it scans and what it changes.
type RecertParams struct {
	EtcdEndpoint string
	// CryptoDirs/Files hold the certificates and keys to regenerate;
	// CustomizationDirs/Files the files that name the cluster. Each must exist: recert
	// refuses a missing one.
	CryptoDirs, CryptoFiles               []string
	CustomizationDirs, CustomizationFiles []string
	// Seed is the identity the factory gave the node, Site the one it gets.
	Seed, Site Identity
	// ChronyConfig, when set, replaces chrony.conf in the cluster's resources.
	ChronyConfig string
	// SummaryFile receives recert's summary without secrets.
	SummaryFile string
}

// RecertArgs builds recert's command line. The flags are those recert's clap definitions
// declare (rh-ecosystem-edge/recert, src/config/cli.rs; testdata/recert-cli.txt records
// them): --cluster-rename NAME:DOMAIN, --cn-san-replace OLD:NEW (OLD,NEW for IPv6),
// --hostname, repeated --ip (IPv4 first), --chrony-config, and --extend-expiration, which
// renews every certificate the factory issued from now on, so what the factory left
// short-lived (the kubelet's 30-day client certificate) starts its life at the site.
func RecertArgs(p RecertParams) []string {
	args := []string{"--etcd-endpoint", p.EtcdEndpoint}
	for _, f := range []struct {
		flag  string
		paths []string
	}{
		{"--crypto-dir", p.CryptoDirs}, {"--crypto-file", p.CryptoFiles},
		{"--cluster-customization-dir", p.CustomizationDirs}, {"--cluster-customization-file", p.CustomizationFiles},
	} {
		for _, path := range f.paths {
			args = append(args, f.flag, path)
		}
	}
	old, site := p.Seed, p.Site
	if site.ClusterName != old.ClusterName || site.BaseDomain != old.BaseDomain {
		from, to := old.ClusterName+"."+old.BaseDomain, site.ClusterName+"."+site.BaseDomain
		args = append(args, "--cluster-rename", site.ClusterName+":"+site.BaseDomain)
		for _, prefix := range []string{"api-int.", "api.", "*.apps."} {
			args = append(args, "--cn-san-replace", prefix+from+":"+prefix+to)
		}
	}
	if site.Hostname != "" && site.Hostname != old.Hostname {
		args = append(args, "--hostname", site.Hostname)
		if old.Hostname != "" {
			args = append(args, "--cn-san-replace", old.Hostname+":"+site.Hostname)
		}
	}
	if len(site.IPs) > 0 && strings.Join(site.IPs, ",") != strings.Join(old.IPs, ",") {
		for _, ip := range site.IPs {
			args = append(args, "--ip", ip)
		}
		for _, pair := range pairIPs(old.IPs, site.IPs) {
			args = append(args, "--cn-san-replace", pair)
		}
	}
	if p.ChronyConfig != "" {
		args = append(args, "--chrony-config", p.ChronyConfig)
	}
	if p.SummaryFile != "" {
		args = append(args, "--summary-file-clean", p.SummaryFile)
	}
	return append(args, "--extend-expiration")
}

// pairIPs pairs old and new addresses of the same family as recert's replace rules: an
// IPv6 pair is separated by ',' since its addresses hold ':'.
func pairIPs(old, site []string) []string {
	var out []string
	for _, o := range old {
		oa, err := netip.ParseAddr(o)
		if err != nil {
			continue
		}
		for _, s := range site {
			sa, err := netip.ParseAddr(s)
			if err != nil || sa.Is4() != oa.Is4() || sa == oa {
				continue
			}
			sep := ":"
			if sa.Is6() {
				sep = ","
			}
			out = append(out, o+sep+s)
			break
		}
	}
	return out
}
