package siteconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/kdomanski/iso9660"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// The image-based installer's site medium (`openshift-install image-based create
// config-image`): an ISO labelled cluster-config (relocation-config before it) holding
// cluster-configuration/manifest.json, a SeedReconfiguration, and manifests. A site that
// already makes these keeps its tooling: the hook reads that layout too and converts it.
const (
	ImageBasedVolumeLabel = "cluster-config"
	legacyImageBasedLabel = "relocation-config"
	imageBasedManifest    = "cluster-configuration/manifest.json"
	// seedReconfigurationVersion is the only api_version lifecycle-agent accepts.
	seedReconfigurationVersion = 1
)

// MediumLabels are the volume labels a site medium may carry: ours, then the image-based
// installer's and its legacy one.
func MediumLabels() []string {
	return []string{VolumeLabel, ImageBasedVolumeLabel, legacyImageBasedLabel}
}

// seedReconfiguration is the installer's SeedReconfiguration (lifecycle-agent
// api/seedreconfig), as much as the hook applies. KubeconfigCryptoRetention and its
// objects have no JSON tags upstream: their keys are the Go field names.
type seedReconfiguration struct {
	APIVersion            int      `json:"api_version"`
	BaseDomain            string   `json:"base_domain"`
	ClusterName           string   `json:"cluster_name"`
	ClusterID             string   `json:"cluster_id"`
	InfraID               string   `json:"infra_id"`
	NodeIP                string   `json:"node_ip"`
	NodeIPs               []string `json:"node_ips"`
	ReleaseRegistry       string   `json:"release_registry"`
	Hostname              string   `json:"hostname"`
	SSHKey                string   `json:"ssh_key"`
	KubeadminPasswordHash string   `json:"kubeadmin_password_hash"`
	RawNMStateConfig      string   `json:"raw_nm_state_config"`
	PullSecret            string   `json:"pull_secret"`
	ChronyConfig          string   `json:"chrony_config"`
	MachineNetwork        string   `json:"machine_network"`
	MachineNetworks       []string `json:"machine_networks"`

	KubeconfigCryptoRetention struct {
		KubeAPICrypto struct {
			ServingCrypto struct {
				LocalhostSignerPrivateKey      string `json:"localhost_signer_private_key"`
				ServiceNetworkSignerPrivateKey string `json:"service_network_signer_private_key"`
				LoadbalancerSignerPrivateKey   string `json:"loadbalancer_external_signer_private_key"`
			}
			ClientAuthCrypto struct {
				AdminCACertificate string `json:"admin_ca_certificate"`
			}
		}
		IngresssCrypto struct {
			IngressCA            string `json:"ingress_ca"`
			IngressCertificateCN string `json:"ingress_certificate_cn"`
		}
	}

	// Proxy is install-config's proxy, its noProxy completed with the cluster's networks
	// (installer pkg/asset/imagebased/configimage/clusterconfiguration.go enrichNoProxy); it
	// becomes spec.proxy, checked and applied as ours is.
	Proxy *struct {
		HTTPProxy  string `json:"httpProxy"`
		HTTPSProxy string `json:"httpsProxy"`
		NoProxy    string `json:"noProxy"`
	} `json:"proxy"`
	// What the hook does not apply in this version: refused by name when set. The installer
	// never writes these (lifecycle-agent fills them from a running cluster for an upgrade).
	StatusProxy   json.RawMessage `json:"status_proxy"`
	InstallConfig string          `json:"install_config"`
	// AdditionalTrustBundle is the site's user-ca-bundle, and the proxy's trusted CA when
	// the installer made it that bundle (see trustPolicy).
	AdditionalTrustBundle struct {
		UserCaBundle         string `json:"userCaBundle"`
		ProxyConfigmapName   string `json:"proxyConfigmapName"`
		ProxyConfigmapBundle string `json:"proxyConfigmapBundle"`
	} `json:"additionalTrustBundle"`
	ServerSSHKeys json.RawMessage   `json:"server_ssh_keys"`
	NodeLabels    map[string]string `json:"node_labels"`
}

var chronyServer = regexp.MustCompile(`^\s*(server|pool)\s+(\S+)`)

// fromSeedReconfiguration converts the installer's manifest.json (and the manifests beside
// it) into a site config document, which Parse then checks as strictly as our own.
func fromSeedReconfiguration(data []byte, manifests []Manifest) ([]byte, error) {
	var sr seedReconfiguration
	if err := strictjson.DecodeOpen(data, &sr); err != nil {
		return nil, fmt.Errorf("%s: %w", imageBasedManifest, err)
	}
	if sr.APIVersion != seedReconfigurationVersion {
		return nil, fmt.Errorf("%s: api_version %d, this hook reads %d", imageBasedManifest, sr.APIVersion, seedReconfigurationVersion)
	}
	if err := refuseUnapplied(&sr); err != nil {
		return nil, err
	}
	name, _, _ := strings.Cut(sr.Hostname, ".")
	spec := map[string]any{"hostname": sr.Hostname}
	set := func(k, v string) {
		if v != "" {
			spec[k] = v
		}
	}
	set("clusterName", sr.ClusterName)
	set("baseDomain", sr.BaseDomain)
	set("clusterID", sr.ClusterID)
	set("infraID", sr.InfraID)
	set("pullSecret", sr.PullSecret)
	set("kubeadminPasswordHash", sr.KubeadminPasswordHash)
	set("additionalTrustBundle", sr.AdditionalTrustBundle.UserCaBundle)
	if p := sr.Proxy; p != nil {
		spec["proxy"] = map[string]string{"httpProxy": p.HTTPProxy, "httpsProxy": p.HTTPSProxy, "noProxy": p.NoProxy}
	}
	policy, err := trustPolicy(&sr)
	if err != nil {
		return nil, err
	}
	set("additionalTrustBundlePolicy", policy)
	if len(sr.NodeLabels) > 0 {
		spec["nodeLabels"] = sr.NodeLabels
	}
	if sr.SSHKey != "" {
		spec["sshAuthorizedKeys"] = []string{strings.TrimSpace(sr.SSHKey)}
	}
	if sr.RawNMStateConfig != "" {
		var network any
		if err := yaml.Unmarshal([]byte(sr.RawNMStateConfig), &network); err != nil {
			return nil, fmt.Errorf("%s: raw_nm_state_config: %w", imageBasedManifest, err)
		}
		spec["network"] = network
	}
	if sr.ChronyConfig != "" {
		var servers []string
		for _, line := range strings.Split(sr.ChronyConfig, "\n") {
			if m := chronyServer.FindStringSubmatch(line); m != nil {
				servers = append(servers, m[2])
			}
		}
		if len(servers) > 0 {
			spec["ntp"] = map[string]any{"servers": servers}
		}
	}
	k := sr.KubeconfigCryptoRetention
	if s := k.KubeAPICrypto.ServingCrypto; s.LoadbalancerSignerPrivateKey != "" || s.LocalhostSignerPrivateKey != "" {
		crypto := map[string]string{"loadBalancerSignerKey": s.LoadbalancerSignerPrivateKey, "localhostSignerKey": s.LocalhostSignerPrivateKey,
			"serviceNetworkSignerKey": s.ServiceNetworkSignerPrivateKey, "adminClientCACert": k.KubeAPICrypto.ClientAuthCrypto.AdminCACertificate}
		if k.IngresssCrypto.IngressCA != "" {
			crypto["ingressCAKey"] = k.IngresssCrypto.IngressCA
		}
		spec["kubeconfigCrypto"] = crypto
	}
	if len(manifests) > 0 {
		spec["manifests"] = manifests
	}
	doc := map[string]any{"apiVersion": APIVersion, "kind": Kind, "metadata": map[string]string{"name": name}, "spec": spec}
	return yaml.Marshal(doc)
}

// refuseUnapplied names what the medium sets and the hook does not apply.
func refuseUnapplied(sr *seedReconfiguration) error {
	var unsupported []string
	for key, set := range map[string]bool{
		"status_proxy": len(sr.StatusProxy) > 0 && string(sr.StatusProxy) != "null", "install_config": sr.InstallConfig != "",
		"server_ssh_keys": len(sr.ServerSSHKeys) > 0 && string(sr.ServerSSHKeys) != "null" && string(sr.ServerSSHKeys) != "[]",
	} {
		if set {
			unsupported = append(unsupported, key)
		}
	}
	if len(unsupported) > 0 {
		slices.Sort(unsupported)
		return fmt.Errorf("%s sets %s, which the reconfiguration hook does not apply in this version; leave them out or use a snofactory site config",
			imageBasedManifest, strings.Join(unsupported, ", "))
	}
	return nil
}

// trustPolicy is the additionalTrustBundlePolicy that gives the proxy the trusted CA the
// medium names. The installer names user-ca-bundle, holding the site's bundle, when the
// policy is Always or Proxyonly with a proxy, and nothing otherwise
// (pkg/asset/imagebased/configimage/clusterconfiguration.go ClusterConfiguration.Generate);
// lifecycle-agent wants the name and the bundle both or neither
// (internal/recert/recert.go SetRecertTrustedCaBundleFromSeedReconfigAdditionaTrustBundle).
// Anything the installer would not write is refused: the hook could not honour it.
func trustPolicy(sr *seedReconfiguration) (string, error) {
	b := sr.AdditionalTrustBundle
	const field = imageBasedManifest + ": additionalTrustBundle"
	switch {
	case b.ProxyConfigmapName == "" && b.ProxyConfigmapBundle != "":
		return "", fmt.Errorf("%s sets proxyConfigmapBundle without proxyConfigmapName; set both or neither", field)
	case b.ProxyConfigmapName == "":
		if sr.Proxy != nil && b.UserCaBundle != "" {
			return "", fmt.Errorf("%s gives a bundle and the medium a proxy, but names no proxyConfigmapName: the proxy would not trust the bundle, "+
				"which the hook cannot do; set proxyConfigmapName to %q (as the installer does) or leave the bundle out", field, userCABundleConfigMap)
		}
		return "", nil
	case b.ProxyConfigmapName != userCABundleConfigMap:
		return "", fmt.Errorf("%s.proxyConfigmapName is %q: the hook gives the proxy the site's own bundle only; set it to %q or leave it out",
			field, b.ProxyConfigmapName, userCABundleConfigMap)
	case b.UserCaBundle == "" || b.ProxyConfigmapBundle != b.UserCaBundle:
		return "", fmt.Errorf("%s.proxyConfigmapBundle must equal userCaBundle when proxyConfigmapName is %q; give the same bundle in both",
			field, userCABundleConfigMap)
	case sr.Proxy == nil:
		return TrustPolicyAlways, nil
	}
	return TrustPolicyProxyOnly, nil
}

// userCABundleConfigMap is the ConfigMap (namespace openshift-config) that holds the site's
// additionalTrustBundle, the only proxy trusted CA the hook gives.
const userCABundleConfigMap = "user-ca-bundle"

// imageBasedDocument reads an image-based installer medium's site configuration and
// returns it as a site config document, for Parse.
func imageBasedDocument(img *iso9660.Image, mediumPath string) ([]byte, error) {
	root, err := img.RootDir()
	if err != nil {
		return nil, err
	}
	data, err := readPath(root, imageBasedManifest)
	if err != nil {
		return nil, fmt.Errorf("reading %s from the medium %s: %w", imageBasedManifest, mediumPath, err)
	}
	var manifests []Manifest
	for _, dir := range []string{"cluster-configuration/manifests", "extra-manifests"} {
		files, err := readDir(root, dir)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the medium %s: %w", dir, mediumPath, err)
		}
		manifests = append(manifests, files...)
	}
	doc, err := fromSeedReconfiguration(data, manifests)
	if err != nil {
		return nil, fmt.Errorf("the image-based installer's medium %s: %w", mediumPath, err)
	}
	return doc, nil
}

// find walks from dir to the entry at p (slash-separated, case-insensitive as ISO 9660
// level-1 names are shown in lowercase).
func find(dir *iso9660.File, p string) (*iso9660.File, error) {
	for _, part := range strings.Split(p, "/") {
		children, err := dir.GetChildren()
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(children, func(c *iso9660.File) bool { return strings.EqualFold(c.Name(), part) })
		if i < 0 {
			return nil, os.ErrNotExist
		}
		dir = children[i]
	}
	return dir, nil
}

func readPath(root *iso9660.File, p string) ([]byte, error) {
	f, err := find(root, p)
	if err != nil {
		return nil, err
	}
	if f.IsDir() {
		return nil, fmt.Errorf("%s is a directory", p)
	}
	if f.Size() > MaxFileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", errTooLarge, MaxFileSize)
	}
	return io.ReadAll(io.LimitReader(f.Reader(), MaxFileSize))
}

// readDir reads the manifests (*.yaml, *.yml, *.json) of a directory; a missing directory
// has none.
func readDir(root *iso9660.File, p string) ([]Manifest, error) {
	d, err := find(root, p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	children, err := d.GetChildren()
	if err != nil {
		return nil, err
	}
	var out []Manifest
	for _, c := range children {
		switch strings.ToLower(path.Ext(c.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if len(out) >= maxManifests {
			// A crafted medium must not make the hook read without bound before validation.
			return nil, fmt.Errorf("%s holds more than %d manifests", p, maxManifests)
		}
		if c.IsDir() || c.Size() > MaxFileSize {
			return nil, fmt.Errorf("%s/%s: not a manifest file of at most %d bytes", p, c.Name(), MaxFileSize)
		}
		b, err := io.ReadAll(io.LimitReader(c.Reader(), MaxFileSize))
		if err != nil {
			return nil, err
		}
		out = append(out, Manifest{Name: strings.ToLower(c.Name()), Content: string(b)})
	}
	return out, nil
}
