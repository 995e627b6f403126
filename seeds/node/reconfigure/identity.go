package reconfigure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Where an installed SNO node names itself, under the root.
const (
	// KubeletKubeConfig's server is https://api-int.CLUSTER.DOMAIN:6443.
	KubeletKubeConfig = "/var/lib/kubelet/kubeconfig"
	// PinnedNodeIPDropIn is render's kubelet drop-in that pins the node IP to the
	// relocation address (KUBELET_NODE_IP=...): an IP that does not change at the site.
	PinnedNodeIPDropIn = "/etc/systemd/system/kubelet.service.d/30-snofactory-node-ip.conf"
	// NodeNetDropIn is the MCO nodeip-configuration service's kubelet drop-in, naming the
	// node IP it chose.
	NodeNetDropIn = "/etc/systemd/system/kubelet.service.d/20-nodenet.conf"
)

// SeedIdentity reads the identity the factory gave the node under root. pinned says the
// node IP is the relocation address, which recert must leave alone.
func SeedIdentity(root string) (id Identity, pinned bool, err error) {
	b, err := os.ReadFile(under(root, "/etc/hostname"))
	if err != nil {
		return id, false, fmt.Errorf("reading the seed's host name: %w", err)
	}
	id.Hostname = strings.TrimSpace(string(b))
	id.ClusterName, id.BaseDomain, err = clusterFromKubeConfig(under(root, KubeletKubeConfig))
	if err != nil {
		return id, false, err
	}
	ip, err := kubeletNodeIP(under(root, PinnedNodeIPDropIn))
	if err != nil {
		return id, false, err
	}
	if ip != "" {
		return id, true, nil
	}
	if ip, err = kubeletNodeIP(under(root, NodeNetDropIn)); err != nil {
		return id, false, err
	}
	if ip != "" {
		id.IPs = []string{ip}
	}
	return id, false, nil
}

// clusterFromKubeConfig splits the API host api-int.NAME.DOMAIN of a kubeconfig's cluster.
func clusterFromKubeConfig(path string) (name, domain string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("reading the seed's cluster name: %w", err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil || len(kc.Clusters) == 0 {
		return "", "", fmt.Errorf("reading the seed's cluster name: %s has no cluster (%v)", path, err)
	}
	u, err := url.Parse(kc.Clusters[0].Cluster.Server)
	if err != nil {
		return "", "", fmt.Errorf("reading the seed's cluster name from %s: %w", path, err)
	}
	host, ok := strings.CutPrefix(u.Hostname(), "api-int.")
	if !ok {
		host, ok = strings.CutPrefix(u.Hostname(), "api.")
	}
	name, domain, dot := strings.Cut(host, ".")
	if !ok || !dot || name == "" || domain == "" {
		return "", "", fmt.Errorf("reading the seed's cluster name: the API server %q in %s is not api-int.CLUSTER.DOMAIN", u.Host, path)
	}
	return name, domain, nil
}

// kubeletNodeIP reads KUBELET_NODE_IP from a systemd drop-in's Environment= lines; "" when
// the file or the variable is absent.
func kubeletNodeIP(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the node IP: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Environment=")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(v) {
			if ip, ok := strings.CutPrefix(strings.Trim(f, `"`), "KUBELET_NODE_IP="); ok {
				return ip, nil
			}
		}
	}
	return "", nil
}

// pinnedNodeIP reads the relocation node IP render pins (PinnedNodeIPDropIn); pinned says
// there is one, and recert must then leave the node IP alone.
func pinnedNodeIP(root string) (ip string, pinned bool, err error) {
	ip, err = kubeletNodeIP(under(root, PinnedNodeIPDropIn))
	return ip, ip != "", err
}
