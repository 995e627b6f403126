package reconfigure

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/seeds/node/recert"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// OpenShift paths under the root.
const (
	// OpenShiftNetworkFile and OpenShiftDNSFile are the nmstate states applied.
	OpenShiftNetworkFile = "/etc/snofactory/site-network.yml"
	OpenShiftDNSFile     = "/etc/snofactory/site-dns.yml"
	// OpenShiftPullSecretFile is the kubelet's and CRI-O's global pull secret.
	OpenShiftPullSecretFile = "/var/lib/kubelet/config.json"
	// OpenShiftKeysFile is read by RHCOS's sshd for user core (authorized_keys.d).
	OpenShiftKeysFile = "/home/core/.ssh/authorized_keys.d/snofactory-site"
	// GeneratedManifestsDir holds the manifests the hook makes (the ImageDigestMirrorSet).
	GeneratedManifestsDir = "/etc/snofactory/generated-manifests"
	// MirrorSetName names the site's ImageDigestMirrorSet.
	MirrorSetName = "snofactory-site-mirrors"
	// ChronyConf is chronyd's configuration.
	ChronyConf = "/etc/chrony.conf"
	// NMConnectionsDir is where nmstatectl apply persists NetworkManager's profiles (keyfiles).
	NMConnectionsDir = "/etc/NetworkManager/system-connections/"
	// UserCABundleFile is where lifecycle-agent puts the site's trust bundle for the node
	// (internal/common/consts.go CABundleFilePath); update-ca-trust extracts the anchors
	// into TrustExtractedDir.
	UserCABundleFile  = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	TrustExtractedDir = "/etc/pki/ca-trust/extracted/"
	// NetworkManagerUnit is restarted after the network is applied, as lifecycle-agent does;
	// OVSConfigurationUnit is the MachineConfig's ovs-configuration.service (its unit file
	// OVSConfigurationUnitFile), which builds br-ex on the interface of the default route.
	NetworkManagerUnit       = "NetworkManager.service"
	OVSConfigurationUnit     = "ovs-configuration.service"
	OVSConfigurationUnitFile = "/etc/systemd/system/" + OVSConfigurationUnit
	// KubeletWantsLink and ReconfigureWantsLink are what systemctl enable and disable make
	// and remove for units wanted by multi-user.target.
	KubeletWantsLink     = "/etc/systemd/system/multi-user.target.wants/kubelet.service"
	ReconfigureWantsLink = "/etc/systemd/system/multi-user.target.wants/" + wire.ReconfigureUnitName
)

// openshiftSteps follow lifecycle-agent's post-pivot (lca-cli/postpivot/postpivot.go
// PostPivotConfiguration): network, hostname and the pull secret file, the dnsmasq
// overrides for the new names, recert (which rewrites every copy of the pull secret, the
// kubeadmin hash, the names and the certificates) while kubelet is down, kubelet, the API,
// the inherited mirror objects out and the site's manifests in, the new cluster ID, then
// the waits for a settled cluster and the unit disabled. Our own medium and its extra
// steps (DNS resolver, NTP, mirrors, SSH keys) stay where they were.
func (r *run) openshiftSteps(sc *siteconfig.SiteConfig) ([]step, error) {
	site, err := r.siteIdentity(sc)
	if err != nil {
		return nil, err
	}
	rc, recertArgv, err := r.recertPlan(sc, site)
	if err != nil {
		return nil, err
	}
	return append(r.openshiftNodeSteps(sc, site, rc, recertArgv), r.openshiftClusterSteps(sc, site)...), nil
}

// openshiftNodeSteps are the steps on the node's files while kubelet is down, up to and
// including recert and the trust store refresh that follows it.
func (r *run) openshiftNodeSteps(sc *siteconfig.SiteConfig, site siteIdentity, rc recert.Config, recertArgv []string) []step {
	return []step{
		{steps.Step{Name: "container-storage", Argv: []string{"growpart"}, Changes: []string{ContainerStoragePath},
			Detail: "only with a separate " + ContainerStoragePath + " partition on a disk bigger than the seed: sgdisk -e, growpart, xfs_growfs"}, r.growContainerStorage},
		{steps.Step{Name: "network", Argv: []string{"nmstatectl", "apply", under(r.o.Root, OpenShiftNetworkFile)}, Changes: []string{OpenShiftNetworkFile, NMConnectionsDir},
			Detail: "the whole nmstate document, after any NetworkManager profile left in " + NMConnectionsDir + " is removed; then systemctl restart " +
				NetworkManagerUnit + " and, where OVN runs, " + OVSConfigurationUnit + " (br-ex moves onto the site's default-route interface)"}, r.nmstateNetwork},
		{steps.Step{Name: "hostname", Argv: []string{"hostnamectl", "set-hostname", sc.Spec.Hostname}, Changes: []string{"/etc/hostname"}}, func(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			if _, err := r.cmd(ctx, "hostnamectl", "set-hostname", sc.Spec.Hostname); err != nil {
				return nil, err
			}
			return map[string]string{"hostname": sc.Spec.Hostname}, nil
		}},
		{steps.Step{Name: "dns", Argv: []string{"nmstatectl", "apply", under(r.o.Root, OpenShiftDNSFile)}, Changes: []string{OpenShiftDNSFile, NMConnectionsDir, "/etc/resolv.conf"}}, r.nmstateDNS},
		{steps.Step{Name: "ntp", Argv: []string{"systemctl", "restart", "chronyd.service"}, Changes: []string{ChronyConf}}, r.chrony},
		// lifecycle-agent writes the file too (createPullSecretFile); recert then rewrites the
		// copies in etcd, the MachineConfigs and currentconfig to the same secret, so the MCD
		// sees no drift.
		{steps.Step{Name: StepPullSecret, Changes: []string{OpenShiftPullSecretFile}}, func(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.writeSecretFile(sc, OpenShiftPullSecretFile)
		}},
		{steps.Step{Name: "mirrors", Changes: []string{MirrorsFile, path.Join(GeneratedManifestsDir, MirrorSetName+".yaml")}}, r.openshiftMirrors},
		{steps.Step{Name: "ssh-keys", Changes: []string{"/home/core/.ssh", path.Dir(OpenShiftKeysFile), OpenShiftKeysFile}}, r.coreKeys},
		{steps.Step{Name: "dnsmasq", Argv: []string{"systemctl", "restart", "dnsmasq.service"}, Changes: []string{DnsmasqOverridesFile},
			Detail: "api, api-int and *.apps of the renamed cluster resolve on the node"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			return r.dnsmasqOverrides(ctx, site)
		}},
		{steps.Step{Name: "ssh-host-keys", Argv: []string{"ssh-keygen", "-A", "-f", r.o.Root}, Changes: sshHostKeyFiles(),
			Detail: "only when " + SSHHostKeysDir + " has none: recert replaces the host keys it finds and stops on none"}, r.sshHostKeys},
		{steps.Step{Name: "trust-bundle", Argv: []string{"update-ca-trust"}, Changes: []string{UserCABundleFile, TrustExtractedDir},
			Detail: "only when the site gives an additionalTrustBundle: the node trusts it before recert and the pulls that follow"}, r.trustBundle},
		{steps.Step{Name: "recert", Argv: recertArgv, Changes: recertChanges(sc, rc), Detail: r.recertSettings(rc)}, func(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
			return r.recert(ctx, sc, site, rc)
		}},
		{steps.Step{Name: StepTrustStore, Argv: []string{"update-ca-trust"}, Changes: []string{TrustExtractedDir},
			Detail: "after recert, as lifecycle-agent does: the extracted trust store follows the anchors recert rewrote"}, r.updateCATrust},
	}
}

// StepTrustStore refreshes the node's extracted trust store after recert.
const StepTrustStore = "trust-store"

// updateCATrust runs update-ca-trust after recert, as lifecycle-agent's post-pivot does
// (lca-cli/postpivot/postpivot.go postRecertCommands, run by lca-cli/ops/ops.go
// RecertFullFlow right after RunRecert): recert's user_ca_bundle rewrites any
// **/anchors/openshift-config-user-ca-bundle.crt in the customization dirs and leaves the
// extraction to update-ca-trust (recert src/ocp_postprocess/additional_trust_bundle.rs
// fix_dir_resources). It runs on every site, as upstream's does.
func (r *run) updateCATrust(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
	if _, err := r.cmd(ctx, "update-ca-trust"); err != nil {
		return nil, fmt.Errorf("refreshing the node's trust store after recert: %w", err)
	}
	return map[string]string{"extracted": TrustExtractedDir}, nil
}

// openshiftClusterSteps start kubelet and work through the API: the inherited mirror
// objects out, the site's manifests in, the new cluster ID, the waits for a settled
// cluster and the unit disabled.
func (r *run) openshiftClusterSteps(sc *siteconfig.SiteConfig, site siteIdentity) []step {
	kc := under(r.o.Root, r.o.OpenShift.KubeConfig)
	oc := func(args ...string) []string { return append([]string{"oc", "--kubeconfig", kc}, args...) }
	patch := fmt.Sprintf(`{"spec":{"clusterID":%q}}`, site.clusterID)
	return []step{
		{steps.Step{Name: "kubelet", Argv: []string{"systemctl", "enable", "kubelet.service"}, Changes: []string{KubeletWantsLink},
			Detail: "then systemctl start --no-block crio.service kubelet.service"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			// The seal disabled kubelet and stopped CRI-O; --no-block because this hook runs
			// as a unit that kubelet may be ordered after.
			if _, err := r.cmd(ctx, "systemctl", "enable", "kubelet.service"); err != nil {
				return nil, err
			}
			if _, err := r.cmd(ctx, "systemctl", "start", "--no-block", "crio.service", "kubelet.service"); err != nil {
				return nil, err
			}
			return map[string]string{"started": "crio.service,kubelet.service"}, nil
		}},
		{steps.Step{Name: "api", Argv: oc("get", "--raw", "/readyz")}, r.waitAPI},
		{steps.Step{Name: "old-mirrors", Argv: oc(deleteOldMirrors()...), Changes: []string{"ImageContentSourcePolicy *", "ImageDigestMirrorSet *", "CatalogSource openshift-marketplace/*"},
			Detail: "the seed's mirror objects are not the site's"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			for _, args := range [][]string{deleteOldMirrors(), deleteOldCatalogs()} {
				if _, err := r.cmd(ctx, "oc", append([]string{"--kubeconfig", kc}, args...)...); err != nil {
					return nil, fmt.Errorf("removing the seed's mirror objects: %w", err)
				}
			}
			return map[string]string{"deleted": "ImageContentSourcePolicies,ImageDigestMirrorSets,CatalogSources"}, nil
		}},
		{steps.Step{Name: "manifests", Argv: oc("apply", "-f", under(r.o.Root, ManifestsDir)), Changes: append([]string{ManifestsDir + "/"}, manifestObjects(sc)...)}, r.applyManifests},
		{steps.Step{Name: "cluster-id", Argv: oc("patch", "clusterversion.config.openshift.io", "version", "--type", "merge", "-p", patch),
			Changes: []string{"ClusterVersion version"}}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			if _, err := r.cmd(ctx, "oc", "--kubeconfig", kc, "patch", "clusterversion.config.openshift.io", "version", "--type", "merge", "-p", patch); err != nil {
				return nil, fmt.Errorf("setting the cluster ID: %w", err)
			}
			return map[string]string{"clusterID": site.clusterID}, nil
		}},
		r.nodeLabelsStep(sc, oc),
		{steps.Step{Name: "wait-machine-config", Argv: oc("get", "machineconfigpools.machineconfiguration.openshift.io", "-o", "json"),
			Detail: "every MachineConfigPool updated and the machine-config daemon done on the node (then oc get nodes -o json); a Degraded pool stops the wait at once, naming its reason"},
			func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
				return r.waitMachineConfig(ctx, oc("get", "machineconfigpools.machineconfiguration.openshift.io", "-o", "json"), oc("get", "nodes", "-o", "json"))
			}},
		{steps.Step{Name: "wait-cluster-version", Argv: oc("get", "clusterversion.config.openshift.io", "version", "-o", "json"),
			Detail: "Available=True: recert left it False until the CVO re-evaluates"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			return r.waitReady(ctx, "ClusterVersion", oc("get", "clusterversion.config.openshift.io", "version", "-o", "json"), r.o.Clock, clusterVersionReady)
		}},
		{steps.Step{Name: "wait-cluster-operators", Argv: oc("get", "clusteroperators.config.openshift.io", "-o", "json"),
			Detail: "every ClusterOperator Available, not Progressing, not Degraded, settled for the settle window"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			return r.waitReady(ctx, "ClusterOperators", oc("get", "clusteroperators.config.openshift.io", "-o", "json"), r.o.Clock, r.operatorsSettled)
		}},
		{steps.Step{Name: "wait-node", Argv: oc("get", "nodes", "-o", "json"), Detail: "the Node Ready"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			return r.waitReady(ctx, "Node", oc("get", "nodes", "-o", "json"), r.o.Clock, nodesReady)
		}},
		{steps.Step{Name: "reconfigure-disable", Argv: []string{"systemctl", "disable", wire.ReconfigureUnitName}, Changes: []string{ReconfigureWantsLink},
			Detail: "the hook has done its work (lifecycle-agent disables its unit too)"}, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
			if _, err := r.cmd(ctx, "systemctl", "disable", wire.ReconfigureUnitName); err != nil {
				return nil, err
			}
			return map[string]string{"disabled": wire.ReconfigureUnitName}, nil
		}},
	}
}

// manifestObjects names the API objects the manifests step applies, KIND NAMESPACE/NAME
// (KIND NAME when cluster-scoped): the site's ImageDigestMirrorSet and every object of the
// site's manifests.
func manifestObjects(sc *siteconfig.SiteConfig) []string {
	var out []string
	if len(sc.Spec.RegistryMirrors) > 0 {
		out = append(out, "ImageDigestMirrorSet "+MirrorSetName)
	}
	for _, m := range sc.Spec.Manifests {
		dec := yaml.NewDecoder(strings.NewReader(m.Content))
		for {
			var obj struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name, Namespace string
				} `yaml:"metadata"`
			}
			if dec.Decode(&obj) != nil {
				break
			}
			if obj.Kind == "" {
				continue
			}
			out = append(out, obj.Kind+" "+strings.TrimPrefix(obj.Metadata.Namespace+"/"+obj.Metadata.Name, "/"))
		}
	}
	return out
}

func deleteOldMirrors() []string {
	return []string{"delete", "--ignore-not-found", "--all", "imagecontentsourcepolicies.operator.openshift.io,imagedigestmirrorsets.config.openshift.io"}
}

func deleteOldCatalogs() []string {
	return []string{"delete", "--ignore-not-found", "--all", "-n", "openshift-marketplace", "catalogsources.operators.coreos.com"}
}

// nmstateApply writes state to path and applies it with nmstatectl apply, which applies the
// desired state and, by default, makes it persistent through NetworkManager. The file is
// 0600 as lifecycle-agent writes its nmstate.yaml: a state may carry secrets (802.1x).
func (r *run) nmstateApply(ctx context.Context, path string, state []byte) error {
	if _, err := r.writeUnder(path, state, 0o600); err != nil {
		return err
	}
	_, err := r.cmd(ctx, "nmstatectl", "apply", under(r.o.Root, path))
	return err
}

// nmstateNetwork applies the site's nmstate document whole, as lifecycle-agent's post-pivot
// applies the image-based installer's (lca-cli/postpivot/postpivot.go networkConfiguration:
// applyNMStateConfiguration writes raw_nm_state_config to nmstate.yaml and runs nmstatectl
// apply, then NetworkManager is restarted). The factory NIC's profiles never reach the site
// (the seal removes NMConnectionsDir as lifecycle-agent's seed leaves it out,
// lca-cli/seedcreator/seedcreator.go backupEtc); any profile found there all the same is
// removed first, so it cannot claim a NIC the site bonds. Then ovs-configuration runs again:
// configure-ovs.sh puts br-ex on the interface that holds the default route
// (machine-config-operator templates/common/_base/files/configure-ovs-network.yaml
// get_default_bridge_interface), the site's, before kubelet starts.
func (r *run) nmstateNetwork(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	n := sc.Spec.Network
	if n == nil || len(n.Interfaces) == 0 && n.Routes == nil && n.DNSResolver == nil {
		return map[string]string{"applied": "nothing: the site config has no network"}, nil
	}
	removed, err := r.removeProfiles()
	if err != nil {
		return nil, err
	}
	state, err := n.NMState()
	if err != nil {
		return nil, err
	}
	if err := r.nmstateApply(ctx, OpenShiftNetworkFile, state); err != nil {
		return nil, fmt.Errorf("applying the network: %w", err)
	}
	restarted := []string{NetworkManagerUnit}
	if _, err := os.Stat(under(r.o.Root, OVSConfigurationUnitFile)); err == nil {
		restarted = append(restarted, OVSConfigurationUnit)
	}
	for _, u := range restarted {
		if _, err := r.cmd(ctx, "systemctl", "restart", u); err != nil {
			return nil, fmt.Errorf("restarting %s after the network was applied: %w", u, err)
		}
	}
	d := map[string]string{"file": OpenShiftNetworkFile, "restarted": strings.Join(restarted, ","), "removedProfiles": strings.Join(removed, ",")}
	var names []string
	for _, iface := range n.Interfaces {
		names = append(names, iface.Name)
		d["address."+iface.Name] = staticAddresses(iface)
	}
	d["interfaces"] = strings.Join(names, ",")
	return d, nil
}

// removeProfiles removes the NetworkManager keyfiles the node holds before the site's
// network is applied, and returns their names.
func (r *run) removeProfiles() ([]string, error) {
	dir := under(r.o.Root, NMConnectionsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", NMConnectionsDir, err)
	}
	var removed []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".nmconnection") {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return nil, fmt.Errorf("removing the profile %s%s: %w", NMConnectionsDir, e.Name(), err)
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}

func staticAddresses(iface siteconfig.Interface) string {
	var out []string
	for _, c := range []*siteconfig.IPConfig{iface.IPv4, iface.IPv6} {
		if !c.IsEnabled() {
			continue
		}
		if c.IsDHCP() {
			out = append(out, "dhcp")
		}
		for _, a := range c.Address {
			out = append(out, fmt.Sprintf("%s/%d", a.IP, a.PrefixLength))
		}
	}
	return strings.Join(out, ",")
}

func (r *run) nmstateDNS(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	if n := sc.Spec.Network; n != nil && n.DNSResolver != nil {
		return map[string]string{"applied": "with the network: its nmstate dns-resolver"}, nil
	}
	d := sc.EffectiveDNS()
	if len(d.Servers) == 0 && len(d.Search) == 0 {
		return map[string]string{"applied": "nothing: the site config has no DNS"}, nil
	}
	state, err := yaml.Marshal(struct {
		DNSResolver siteconfig.DNSResolver `yaml:"dns-resolver"`
	}{siteconfig.DNSResolver{Config: siteconfig.DNSResolverConfig{Server: d.Servers, Search: d.Search}}})
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", OpenShiftDNSFile, err)
	}
	if err := r.nmstateApply(ctx, OpenShiftDNSFile, state); err != nil {
		return nil, fmt.Errorf("applying the DNS resolver: %w", err)
	}
	return map[string]string{"dns.servers": strings.Join(d.Servers, ","), "dns.search": strings.Join(d.Search, ","), "file": OpenShiftDNSFile}, nil
}

// chronyConf renders chrony.conf for the site's servers, with RHCOS's other defaults.
func chronyConf(servers []string) string {
	var b strings.Builder
	b.WriteString(generated)
	for _, s := range servers {
		fmt.Fprintf(&b, "server %s iburst\n", s)
	}
	b.WriteString("driftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nlogdir /var/log/chrony\n")
	return b.String()
}

func (r *run) chrony(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	if sc.Spec.NTP == nil || len(sc.Spec.NTP.Servers) == 0 {
		return map[string]string{"applied": "nothing: the site config has no NTP servers"}, nil
	}
	if _, err := r.writeUnder(ChronyConf, []byte(chronyConf(sc.Spec.NTP.Servers)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the NTP servers: %w", err)
	}
	if _, err := r.cmd(ctx, "systemctl", "restart", "chronyd.service"); err != nil {
		return nil, err
	}
	return map[string]string{"ntp.servers": strings.Join(sc.Spec.NTP.Servers, ","), "file": ChronyConf}, nil
}

// openshiftMirrors writes the registries.conf drop-in CRI-O reads at once, and the
// ImageDigestMirrorSet the cluster keeps (applied with the manifests).
func (r *run) openshiftMirrors(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	d, err := r.writeMirrors(sc)
	if err != nil || len(sc.Spec.RegistryMirrors) == 0 {
		return d, err
	}
	idms, err := siteconfig.ImageDigestMirrorSet(MirrorSetName, sc.Spec.RegistryMirrors)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(GeneratedManifestsDir, MirrorSetName+".yaml")
	if _, err := r.writeUnder(p, idms, 0o644); err != nil {
		return nil, err
	}
	d["imageDigestMirrorSet"] = p
	return d, nil
}

// coreKeys writes the keys for user core, owned by core (the owner of its home).
func (r *run) coreKeys(_ context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	d, err := r.writeKeys(sc, OpenShiftKeysFile)
	if err != nil || len(sc.Spec.SSHAuthorizedKeys) == 0 {
		return d, err
	}
	fi, err := os.Stat(under(r.o.Root, "/home/core"))
	if err != nil {
		return nil, fmt.Errorf("finding user core's home: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return d, nil
	}
	for _, p := range []string{"/home/core/.ssh", "/home/core/.ssh/authorized_keys.d", OpenShiftKeysFile} {
		if err := os.Lchown(under(r.o.Root, p), int(st.Uid), int(st.Gid)); err != nil {
			return nil, fmt.Errorf("giving %s to user core: %w", p, err)
		}
	}
	return d, nil
}

// waitAPI polls the local API's /readyz until it answers ok.
func (r *run) waitAPI(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
	readyz := []string{"oc", "--kubeconfig", under(r.o.Root, r.o.OpenShift.KubeConfig), "get", "--raw", "/readyz"}
	took, err := agent.WaitAPI(ctx, r.o.Run, r.o.Clock, readyz, r.o.PollInterval, r.o.OpenShift.APITimeout)
	if err != nil {
		return nil, err
	}
	return map[string]string{"readyz": "ok", "after": shortDuration(took)}, nil
}

// applyManifests applies the generated and the site's manifests. (The cluster's pull
// secret is recert's: it rewrote every copy before kubelet started.)
func (r *run) applyManifests(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	d, err := r.writeManifests(sc)
	if err != nil {
		return nil, err
	}
	kc := under(r.o.Root, r.o.OpenShift.KubeConfig)
	var applied []string
	for _, dir := range []string{GeneratedManifestsDir, ManifestsDir} {
		entries, err := os.ReadDir(under(r.o.Root, dir))
		if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		if _, err := r.cmd(ctx, "oc", "--kubeconfig", kc, "apply", "-f", under(r.o.Root, dir)); err != nil {
			return nil, fmt.Errorf("applying %s: %w", dir, err)
		}
		applied = append(applied, dir)
	}
	d["applied"] = strings.Join(applied, ",")
	return d, nil
}

// siteIPs are the site's first static IPv4 and IPv6 addresses, IPv4 first, as recert
// takes them.
func siteIPs(sc *siteconfig.SiteConfig) []string {
	var v4, v6 string
	if sc.Spec.Network != nil {
		for _, iface := range sc.Spec.Network.Interfaces {
			for _, c := range []*siteconfig.IPConfig{iface.IPv4, iface.IPv6} {
				if !c.IsEnabled() {
					continue
				}
				for _, a := range c.Address {
					ip, err := netip.ParseAddr(a.IP)
					switch {
					case err != nil:
					case ip.Is4() && v4 == "":
						v4 = a.IP
					case ip.Is6() && v6 == "":
						v6 = a.IP
					}
				}
			}
		}
	}
	var out []string
	for _, ip := range []string{v4, v6} {
		if ip != "" {
			out = append(out, ip)
		}
	}
	return out
}

// images are the pinned recert and etcd images: from the options, else ImagesFile.
func (r *run) images() (recert, etcd string, err error) {
	recert, etcd = r.o.OpenShift.RecertImage, r.o.OpenShift.EtcdImage
	if recert != "" && etcd != "" {
		return recert, etcd, nil
	}
	if r.dry {
		return cmp.Or(recert, "<recert image>"), cmp.Or(etcd, "<etcd image>"), nil
	}
	b, err := os.ReadFile(under(r.o.Root, ImagesFile))
	if err != nil {
		return "", "", fmt.Errorf("no recert image given and none recorded on the seed: %w", err)
	}
	var f struct {
		RecertImage string `json:"recertImage"`
		EtcdImage   string `json:"etcdImage"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", "", fmt.Errorf("reading %s: %w", ImagesFile, err)
	}
	recert, etcd = cmp.Or(recert, f.RecertImage), cmp.Or(etcd, f.EtcdImage)
	if recert == "" || etcd == "" {
		return "", "", fmt.Errorf("%s names no recert or no etcd image", ImagesFile)
	}
	return recert, etcd, nil
}

// kubeletLabels are the labels the kubelet and the installer set on an SNO node, which
// lifecycle-agent leaves alone (lca-cli/postpivot/postpivot.go setNodeLabels defaultLabels).
var kubeletLabels = []string{"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os",
	"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "node.openshift.io/os_id", "node-role.kubernetes.io/worker"}

// siteNodeLabels splits the site's node labels into those the hook applies and the
// kubelet's own, which it leaves alone (sorted).
func siteNodeLabels(sc *siteconfig.SiteConfig) (map[string]string, []string) {
	labels := map[string]string{}
	var ignored []string
	for k, v := range sc.Spec.NodeLabels {
		if slices.Contains(kubeletLabels, k) {
			ignored = append(ignored, k)
			continue
		}
		labels[k] = v
	}
	slices.Sort(ignored)
	return labels, ignored
}

// nodeLabelsStep merge-patches the site's labels onto the node once the API answers, as
// lifecycle-agent's post-pivot does after the new cluster ID (setNodeLabels: a JSON merge
// patch of metadata.labels on the SNO node, the kubelet's own labels left out). The node
// is named by the site's host name, as the kubelet registers it.
func (r *run) nodeLabelsStep(sc *siteconfig.SiteConfig, oc func(...string) []string) step {
	labels, ignored := siteNodeLabels(sc)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}}) // strings only: cannot fail
	argv := oc("patch", "node", sc.Spec.Hostname, "--type", "merge", "-p", string(patch))
	// "Node *": a single-node cluster's one node, whatever the dry run's placeholder name.
	st := steps.Step{Name: "node-labels", Argv: argv, Changes: []string{"Node *"}}
	if len(labels) == 0 {
		st.Argv, st.Changes = nil, nil
	}
	return step{st, func(ctx context.Context, _ *siteconfig.SiteConfig) (map[string]string, error) {
		d := map[string]string{"ignored": strings.Join(ignored, ",")}
		if len(labels) == 0 {
			d["applied"] = "nothing: the site config has no node labels of its own"
			return d, nil
		}
		if _, err := r.cmd(ctx, argv[0], argv[1:]...); err != nil {
			return nil, fmt.Errorf("labelling the node %s: %w", sc.Spec.Hostname, err)
		}
		d["labels"] = strings.Join(slices.Sorted(maps.Keys(labels)), ",")
		return d, nil
	}}
}

// trustBundle makes the node trust the site's additional trust bundle before recert, as
// lifecycle-agent's post-pivot does (lca-cli/postpivot/postpivot.go
// establishEarlyCertificateTrust: the userCaBundle written 0600 to CABundleFilePath, then
// update-ca-trust), so pulls through a mirror signed by the site's CA work at once; recert's
// user_ca_bundle then puts it in the cluster.
func (r *run) trustBundle(ctx context.Context, sc *siteconfig.SiteConfig) (map[string]string, error) {
	b := sc.Spec.AdditionalTrustBundle
	if b == "" {
		return map[string]string{"applied": "nothing: the site config has no additionalTrustBundle"}, nil
	}
	if _, err := r.writeUnder(UserCABundleFile, []byte(b), 0o600); err != nil {
		return nil, err
	}
	if _, err := r.cmd(ctx, "update-ca-trust"); err != nil {
		return nil, fmt.Errorf("trusting the site's additionalTrustBundle: %w", err)
	}
	return map[string]string{"file": UserCABundleFile, "certificates": strconv.Itoa(strings.Count(b, "-----BEGIN CERTIFICATE-----"))}, nil
}
