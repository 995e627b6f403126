package reconfigure

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/node/recert"
	"github.com/snofactory/snofactory/seeds/node/seedinfo"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// Identity is what names a cluster and its node.
type Identity struct {
	ClusterName, BaseDomain, Hostname string
	// IPs are the node's addresses, IPv4 first.
	IPs []string
}

// siteIdentity is who the node becomes at the site, and who it was.
type siteIdentity struct {
	seed, site Identity
	// pinned: the node IP is render's relocation address, which recert leaves alone.
	pinned bool
	// ingressCN is the seed's router CA CN (seed cluster info), for crypto retention.
	ingressCN string
	// clusterID and infraID are the site cluster's: from the site config, else made once
	// per site and kept with the progress, so a resumed run uses the same ones.
	clusterID, infraID string
	// The seed's networks (seed cluster info), which a site proxy's noProxy takes.
	machineNetworks, clusterNetworks, serviceNetworks []string
}

// Paths of the OpenShift hook under the root.
const (
	// RecertSummaryFile is recert's summary without secrets. A summary left by an earlier
	// run means recert ran and failed: lifecycle-agent refuses to run it again (postpivot.go
	// recert), since it may have half-changed etcd.
	RecertSummaryFile = DefaultStateDir + "/recert-summary.yaml"
	// KubeconfigCryptoDir holds the retained keys recert signs with (0600).
	KubeconfigCryptoDir = "/var/lib/snofactory/kubeconfig-crypto"
	// DnsmasqOverridesFile is read by the seed's dnsmasq_config.sh and forcedns script
	// (lifecycle-agent's required dnsmasq configuration).
	DnsmasqOverridesFile = "/etc/default/sno_dnsmasq_configuration_overrides"
	// RecertConfigFile is the site run's RECERT_CONFIG (0600: it holds the pull secret,
	// which stays off every command line); removed once recert succeeded.
	RecertConfigFile = DefaultStateDir + "/recert_config.json"
	// siteIDsFile keeps the generated cluster and infra IDs with the progress.
	siteIDsFile = "site-ids.json"
)

// siteIdentity works out the seed's identity and the site's.
func (r *run) siteIdentity(sc *siteconfig.SiteConfig) (siteIdentity, error) {
	var id siteIdentity
	if r.dry {
		id.seed = Identity{ClusterName: "<seed cluster>", BaseDomain: "<seed domain>", Hostname: "<seed hostname>", IPs: []string{"<seed IP>"}}
		id.ingressCN = "<seed ingress CN>"
		id.machineNetworks, id.clusterNetworks, id.serviceNetworks = []string{"<seed machine network>"}, []string{"<seed cluster network>"}, []string{"<seed service network>"}
	} else {
		info, err := seedinfo.Read(under(r.o.Root, seedinfo.File))
		switch {
		case err == nil:
			id.seed = Identity{ClusterName: info.ClusterName, BaseDomain: info.BaseDomain, Hostname: info.Hostname, IPs: info.NodeIPs}
			id.ingressCN = info.IngressCertificateCN
			id.machineNetworks, id.clusterNetworks, id.serviceNetworks = info.MachineNetworks, info.ClusterNetworks, info.ServiceNetworks
			_, id.pinned, err = pinnedNodeIP(r.o.Root)
			if err != nil {
				return id, err
			}
		case errors.Is(err, fs.ErrNotExist):
			// Seeds sealed before the seal recorded the cluster info: read the node's files.
			seed, pinned, err := SeedIdentity(r.o.Root)
			if err != nil {
				return id, err
			}
			id.seed, id.pinned = seed, pinned
		default:
			return id, err
		}
	}
	id.site = Identity{ClusterName: cmp.Or(sc.Spec.ClusterName, id.seed.ClusterName),
		BaseDomain: cmp.Or(sc.Spec.BaseDomain, id.seed.BaseDomain), Hostname: sc.Spec.Hostname}
	if !id.pinned {
		id.site.IPs = siteIPs(sc)
	}
	ids, err := r.siteIDs(sc, id.site.ClusterName)
	if err != nil {
		return id, err
	}
	id.clusterID, id.infraID = ids.ClusterID, ids.InfraID
	return id, nil
}

type siteIDs struct {
	ClusterID string `json:"clusterID"`
	InfraID   string `json:"infraID"`
}

// siteIDs are the site config's cluster and infra IDs, or ones made for this site and kept
// in the progress directory (which starts over for a different site config).
func (r *run) siteIDs(sc *siteconfig.SiteConfig, cluster string) (siteIDs, error) {
	ids := siteIDs{ClusterID: sc.Spec.ClusterID, InfraID: sc.Spec.InfraID}
	if r.dry {
		ids.ClusterID, ids.InfraID = cmp.Or(ids.ClusterID, "<new cluster ID>"), cmp.Or(ids.InfraID, "<new infra ID>")
		return ids, nil
	}
	if ids.ClusterID != "" && ids.InfraID != "" {
		return ids, nil
	}
	p := path.Join(r.o.StateDir, siteIDsFile)
	var kept siteIDs
	if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &kept) == nil && kept.ClusterID != "" && kept.InfraID != "" {
		return siteIDs{cmp.Or(ids.ClusterID, kept.ClusterID), cmp.Or(ids.InfraID, kept.InfraID)}, nil
	}
	made, err := newSiteIDs(cluster)
	if err != nil {
		return ids, err
	}
	ids = siteIDs{cmp.Or(ids.ClusterID, made.ClusterID), cmp.Or(ids.InfraID, made.InfraID)}
	b, _ := json.Marshal(ids)
	if err := writeFile(p, b, 0o644); err != nil {
		return ids, fmt.Errorf("keeping the site's cluster ID: %w", err)
	}
	return ids, nil
}

// newSiteIDs makes a UUID v4 cluster ID and an infra ID the way the installer does
// (<cluster name, at most 21 characters>-<5 random lowercase letters and digits>).
func newSiteIDs(cluster string) (siteIDs, error) {
	b := make([]byte, 21)
	if _, err := rand.Read(b); err != nil {
		return siteIDs{}, fmt.Errorf("making the site's cluster ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = alnum[int(b[16+i])%len(alnum)]
	}
	name := cluster
	if len(name) > 21 {
		name = strings.TrimRight(name[:21], "-")
	}
	return siteIDs{ClusterID: id, InfraID: name + "-" + string(suffix)}, nil
}

// retainedKeys are the files the site's retained crypto is written to, and recert's rules
// for them (lifecycle-agent recert.go CreateRecertConfigFile, crypto_dir.go).
func retainedKeys(k *siteconfig.KubeconfigCrypto, ingressCN string) (files map[string]string, useKeys, useCerts []string) {
	if k == nil {
		return nil, nil, nil
	}
	dir := KubeconfigCryptoDir
	files = map[string]string{
		dir + "/loadbalancer-serving-signer.key":    k.LoadBalancerSignerKey,
		dir + "/localhost-serving-signer.key":       k.LocalhostSignerKey,
		dir + "/service-network-serving-signer.key": k.ServiceNetworkSignerKey,
		dir + "/admin-kubeconfig-client-ca.crt":     k.AdminClientCACert,
	}
	useKeys = []string{
		"kube-apiserver-lb-signer " + dir + "/loadbalancer-serving-signer.key",
		"kube-apiserver-localhost-signer " + dir + "/localhost-serving-signer.key",
		"kube-apiserver-service-network-signer " + dir + "/service-network-serving-signer.key",
	}
	if k.IngressCAKey != "" && ingressCN != "" {
		files[dir+"/ingresskey-ingress-operator.key"] = k.IngressCAKey
		useKeys = append(useKeys, ingressCN+" "+dir+"/ingresskey-ingress-operator.key")
	}
	return files, useKeys, []string{dir + "/admin-kubeconfig-client-ca.crt"}
}

// recertPlan is the site's recert run: its configuration and its podman command line.
func (r *run) recertPlan(sc *siteconfig.SiteConfig, id siteIdentity) (recert.Config, []string, error) {
	recertImage, _, err := r.images()
	if err != nil {
		return recert.Config{}, nil, err
	}
	_, useKeys, useCerts := retainedKeys(sc.Spec.KubeconfigCrypto, id.ingressCN)
	hash := sc.Spec.KubeadminPasswordHash // "" deletes the secret: the factory's never survives
	c := recert.Config{EtcdEndpoint: recert.EtcdEndpoint,
		CryptoDirs: r.existing(recert.CryptoDirs()), CryptoFiles: r.existing(recert.CryptoFiles()),
		CustomizationDirs: r.existing(recert.CustomizationDirs()), CustomizationFiles: r.existing(recert.CustomizationFiles()),
		ClusterRename:         id.site.ClusterName + ":" + id.site.BaseDomain + ":" + id.infraID,
		CNSANReplace:          cnSANRules(id),
		PullSecret:            sc.Spec.PullSecret,
		KubeadminPasswordHash: &hash,
		UseKeys:               useKeys, UseCerts: useCerts,
		RegenerateServerSSHKeys: SSHHostKeysDir,
		ExtendExpiration:        true,
		SummaryFileClean:        RecertSummaryFile,
	}
	if id.site.Hostname != "" && id.site.Hostname != id.seed.Hostname {
		c.Hostname = id.site.Hostname
	}
	if len(id.site.IPs) > 0 && strings.Join(id.site.IPs, ",") != strings.Join(id.seed.IPs, ",") {
		c.IPs = id.site.IPs
	}
	if sc.Spec.NTP != nil && len(sc.Spec.NTP.Servers) > 0 {
		c.ChronyConfig = chronyConf(sc.Spec.NTP.Servers)
	}
	// lifecycle-agent passes the site's userCaBundle as user_ca_bundle, and the proxy's
	// trusted CA, when it is that bundle, as "user-ca-bundle:" (internal/recert/recert.go
	// SetRecertTrustedCaBundleFromSeedReconfigAdditionaTrustBundle).
	c.UserCABundle = sc.Spec.AdditionalTrustBundle
	if sc.ProxyTrustsBundle() {
		c.ProxyTrustedCABundle = recert.UserCABundleConfigMap + ":"
	}
	if c.Proxy, err = recertProxy(sc, id); err != nil {
		return c, nil, err
	}
	if _, err := recert.ConfigJSON(c); err != nil {
		return c, nil, err
	}
	return c, recert.RunConfigArgv(recertImage, r.o.Root, RecertConfigFile, c), nil
}

// recertSettings is the run's configuration as recert's flags, secrets shown as
// placeholders, for the dry run: the file itself holds the pull secret.
func (r *run) recertSettings(c recert.Config) string {
	if c.PullSecret != "" {
		c.PullSecret = "<site pull secret>"
	}
	if c.UserCABundle != "" {
		c.UserCABundle = "<site additionalTrustBundle>"
	}
	if p := strings.Split(c.Proxy, "|"); len(p) == 6 {
		for i := range p {
			p[i] = siteconfig.RedactURL(p[i])
		}
		c.Proxy = strings.Join(p, "|")
	}
	return "RECERT_CONFIG holds: " + r.redact(strings.Join(recert.Args(c), " "))
}

// recertChanges says what a site recert changes, for the dry run: its configuration file
// (written, then removed), the retained keys it signs with, the etcd database through the
// standalone etcd, the containers' storage, the host keys, every directory and file it re-signs or renames in (an
// entry ending in "/" is the files under it), its summary, and the API objects in etcd.
func recertChanges(sc *siteconfig.SiteConfig, c recert.Config) []string {
	out := []string{RecertConfigFile}
	files, _, _ := retainedKeys(sc.Spec.KubeconfigCrypto, "<seed ingress CN>")
	out = append(out, slices.Sorted(maps.Keys(files))...)
	// The standalone etcd writes the database; both containers live in CRI-O's storage.
	out = append(out, "/var/lib/etcd/", "/var/lib/containers/storage/")
	if c.RegenerateServerSSHKeys != "" {
		out = append(out, sshHostKeyFiles()...)
	}
	for _, ps := range [][]string{c.CryptoDirs, c.CustomizationDirs} {
		for _, d := range ps {
			if d = strings.TrimSuffix(d, "/") + "/"; !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	for _, f := range append(slices.Clone(c.CryptoFiles), c.CustomizationFiles...) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return append(out, RecertSummaryFile, "Secret openshift-config/pull-secret", "Secret kube-system/kubeadmin",
		"MachineConfig *", "ClusterVersion version")
}

// cnSANRules are recert's CN/SAN replace rules (lifecycle-agent recert.go): recert matches
// the whole CN and each whole DNS SAN, so the kubelet's system:node:NAME needs its own rule.
// Each is OLD,NEW as upstream writes them.
func cnSANRules(id siteIdentity) []string {
	var out []string
	old, site := id.seed, id.site
	if site.Hostname != "" && site.Hostname != old.Hostname && old.Hostname != "" {
		out = append(out, "system:node:"+old.Hostname+",system:node:"+site.Hostname, old.Hostname+","+site.Hostname)
	}
	if site.ClusterName != old.ClusterName || site.BaseDomain != old.BaseDomain {
		from, to := old.ClusterName+"."+old.BaseDomain, site.ClusterName+"."+site.BaseDomain
		for _, prefix := range []string{"api.", "api-int.", "*.apps."} {
			out = append(out, prefix+from+","+prefix+to)
		}
	}
	if len(site.IPs) > 0 {
		out = append(out, pairIPs(old.IPs, site.IPs)...)
	}
	return out
}

// pairIPs pairs old and new addresses of the same family.
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
			out = append(out, o+","+s)
			break
		}
	}
	return out
}

// recertProxy is recert's proxy value for the site's proxy ("" without one). Its noProxy is
// completed as lifecycle-agent's post-pivot completes it when the site gives no status proxy
// (lca-cli/postpivot/postpivot.go setProxyAndProxyStatus): 127.0.0.1, localhost, .svc,
// .cluster.local, api-int.CLUSTER.DOMAIN, the machine networks, the seed's service and
// cluster networks and the site's own entries, sorted, duplicates dropped; the status is the
// same as the spec, as the network operator would compute it.
func recertProxy(sc *siteconfig.SiteConfig, id siteIdentity) (string, error) {
	p := sc.Spec.Proxy
	if p == nil {
		return "", nil
	}
	machine := siteMachineNetworks(sc)
	if id.pinned || len(machine) == 0 {
		machine = append(machine, id.machineNetworks...)
	}
	if len(machine) == 0 {
		return "", errors.New("the site's proxy needs the node's machine network for its noProxy, as lifecycle-agent does: " +
			"give the node a static address in spec.network (its subnet is the machine network); the seed records none either")
	}
	if len(id.serviceNetworks) == 0 || len(id.clusterNetworks) == 0 {
		return "", errors.New("the site's proxy needs the seed's service and cluster networks for its noProxy, and this seed " +
			"records none (it was sealed by an older snofactory): seal the seed again, or leave spec.proxy out")
	}
	set := []string{"127.0.0.1", "localhost", ".svc", ".cluster.local", "api-int." + id.site.ClusterName + "." + id.site.BaseDomain}
	set = append(append(append(set, machine...), id.serviceNetworks...), id.clusterNetworks...)
	for _, v := range strings.Split(p.NoProxy, ",") {
		if v != "" {
			set = append(set, v)
		}
	}
	slices.Sort(set)
	spec := recert.ProxySettings{HTTP: p.HTTPProxy, HTTPS: p.HTTPSProxy, No: strings.Join(slices.Compact(set), ",")}
	return recert.FormatProxy(spec, spec), nil
}

// siteMachineNetworks are the subnets of the node's site addresses (the first static
// address of each family, as siteIPs picks them).
func siteMachineNetworks(sc *siteconfig.SiteConfig) []string {
	if sc.Spec.Network == nil {
		return nil
	}
	ips := siteIPs(sc)
	var out []string
	for _, iface := range sc.Spec.Network.Interfaces {
		for _, c := range []*siteconfig.IPConfig{iface.IPv4, iface.IPv6} {
			if !c.IsEnabled() {
				continue
			}
			for _, a := range c.Address {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil || !slices.Contains(ips, a.IP) {
					continue
				}
				if n, err := ip.Prefix(a.PrefixLength); err == nil && !slices.Contains(out, n.String()) {
					out = append(out, n.String())
				}
			}
		}
	}
	return out
}
