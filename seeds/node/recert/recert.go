package recert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
)

// DefaultImage is recert's image when a blueprint names none (lifecycle-agent's
// internal/common/consts.go DefaultRecertImage).
const DefaultImage = "quay.io/edge-infrastructure/recert:v0"

// EtcdEndpoint is where the standalone etcd listens for recert.
const EtcdEndpoint = "localhost:2379"

// What recert scans and rewrites on an SNO node: the directories and files
// lifecycle-agent passes it (internal/recert/recert.go createBaseRecertConfig). /etc/pki is
// deliberately no crypto dir: only the trust bundle lives there.
func CryptoDirs() []string {
	return []string{"/etc/kubernetes", "/var/lib/kubelet", "/etc/machine-config-daemon"}
}

// CryptoFiles are the single files recert re-signs.
func CryptoFiles() []string { return []string{"/etc/mcs-machine-config-content.json"} }

// CustomizationDirs are the directories recert renames the cluster in.
func CustomizationDirs() []string {
	return []string{"/etc/kubernetes", "/var/lib/kubelet", "/etc/machine-config-daemon"}
}

// CustomizationFiles are the single files recert renames the cluster in.
func CustomizationFiles() []string {
	return []string{"/etc/mcs-machine-config-content.json", "/etc/mco/proxy.env", "/etc/chrony.conf"}
}

// Config is one recert run. Paths are node paths; the container mounts each at the same
// path (Mounts), so a Config reads the same inside and outside.
type Config struct {
	EtcdEndpoint string
	// CryptoDirs/Files hold the certificates and keys to re-sign; CustomizationDirs/Files
	// the files that name the cluster. recert refuses a path that does not exist.
	CryptoDirs, CryptoFiles               []string
	CustomizationDirs, CustomizationFiles []string

	// ClusterRename is NAME:DOMAIN[:INFRA_ID]; "" keeps the name.
	ClusterRename string
	// CNSANReplace are OLD:NEW rules (OLD,NEW when a value holds ':'); recert matches
	// the whole CN and each whole DNS SAN.
	CNSANReplace []string
	Hostname     string
	// IPs are the node's new addresses, IPv4 first, at most two.
	IPs []string
	// PullSecret rewrites every copy of the cluster's pull secret.
	PullSecret string
	// KubeadminPasswordHash, when set, replaces the kubeadmin secret's bcrypt hash; a
	// pointer to "" deletes the secret. nil leaves the seed's secret alone, which neither
	// the seal nor a site run ever wants.
	KubeadminPasswordHash *string
	// UseKeys are "CN PATH" rules: re-sign with this private key instead of a new one.
	// UseCerts are certificate files that replace the one with the same subject whole.
	UseKeys, UseCerts []string
	ChronyConfig      string
	// Proxy is "HTTP|HTTPS|NO|STATUS_HTTP|STATUS_HTTPS|STATUS_NO": the Proxy CR's spec and
	// status, which recert writes into the CR, the MachineConfigs, the ControllerConfig,
	// the workloads and /etc/mco/proxy.env (src/ocp_postprocess/proxy_rename.rs rename_all);
	// FormatProxy makes it.
	Proxy string
	// UserCABundle is the cluster's additional trust bundle (PEM), which recert puts in the
	// user-ca-bundle ConfigMap and the node's anchors (src/ocp_postprocess/
	// additional_trust_bundle.rs); ProxyTrustedCABundle is NAME:BUNDLE for the proxy's
	// trustedCA ConfigMap ("user-ca-bundle:" names that one).
	UserCABundle, ProxyTrustedCABundle string
	// ExtendExpiration starts every re-signed certificate's life now (the site run);
	// ForceExpire ends it now (the seed-time run). recert takes one at most.
	ExtendExpiration, ForceExpire bool
	// EtcdDefrag compacts and defragments etcd after the run.
	EtcdDefrag bool
	// RegenerateServerSSHKeys is the directory whose SSH host keys recert replaces.
	RegenerateServerSSHKeys string
	// SummaryFileClean receives recert's summary without private keys or tokens.
	SummaryFileClean string
}

// Args is recert's command line for c, in a fixed order.
func Args(c Config) []string {
	var args []string
	one := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	many := func(flag string, vs []string) {
		for _, v := range vs {
			args = append(args, flag, v)
		}
	}
	bool_ := func(flag string, v bool) {
		if v {
			args = append(args, flag)
		}
	}
	one("--etcd-endpoint", c.EtcdEndpoint)
	many("--crypto-dir", c.CryptoDirs)
	many("--crypto-file", c.CryptoFiles)
	many("--cluster-customization-dir", c.CustomizationDirs)
	many("--cluster-customization-file", c.CustomizationFiles)
	one("--cluster-rename", c.ClusterRename)
	many("--cn-san-replace", c.CNSANReplace)
	one("--hostname", c.Hostname)
	many("--ip", c.IPs)
	one("--pull-secret", c.PullSecret)
	if c.KubeadminPasswordHash != nil {
		// recert takes an empty value as "delete the secret".
		args = append(args, "--kubeadmin-password-hash", *c.KubeadminPasswordHash)
	}
	many("--use-key", c.UseKeys)
	many("--use-cert", c.UseCerts)
	one("--chrony-config", c.ChronyConfig)
	one("--proxy", c.Proxy)
	one("--user-ca-bundle", c.UserCABundle)
	one("--proxy-trusted-ca-bundle", c.ProxyTrustedCABundle)
	one("--regenerate-server-ssh-keys", c.RegenerateServerSSHKeys)
	one("--summary-file-clean", c.SummaryFileClean)
	bool_("--extend-expiration", c.ExtendExpiration)
	bool_("--force-expire", c.ForceExpire)
	bool_("--etcd-defrag", c.EtcdDefrag)
	return args
}

// Mounts are the node paths a recert container needs, each mounted at the same path:
// every path c names, and the summary's directory.
func Mounts(c Config) []string {
	var all []string
	for _, ps := range [][]string{c.CryptoDirs, c.CryptoFiles, c.CustomizationDirs, c.CustomizationFiles} {
		all = append(all, ps...)
	}
	for _, r := range c.UseKeys {
		if _, p, ok := strings.Cut(r, " "); ok {
			all = append(all, path.Dir(p))
		}
	}
	for _, p := range c.UseCerts {
		all = append(all, path.Dir(p))
	}
	if c.RegenerateServerSSHKeys != "" {
		all = append(all, c.RegenerateServerSSHKeys)
	}
	if c.SummaryFileClean != "" {
		all = append(all, path.Dir(c.SummaryFileClean))
	}
	var out []string
	for _, m := range all {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Container names of a run; podman's --replace lets a rerun after a power cut take them over.
const (
	EtcdContainer   = "snofactory-recert-etcd"
	RecertContainer = "snofactory-recert"
)

// EtcdArgv runs the node's etcd database (hostDataDir, usually /var/lib/etcd under the
// root) unauthenticated on localhost:2379, as lifecycle-agent does while kubelet is down
// (ops.go RunUnauthenticatedEtcdServer).
func EtcdArgv(image, hostDataDir string) []string {
	return []string{"podman", "run", "--detach", "--rm", "--replace", "--name", EtcdContainer,
		"--network=host", "--privileged", "--entrypoint", "etcd",
		"-v", hostDataDir + ":/store", image, "--name", "editor", "--data-dir", "/store"}
}

// EtcdHealthArgv asks the standalone etcd whether it is healthy: GET /health answering
// 200, as lifecycle-agent's waitForEtcd does (curl --fail refuses any error status).
func EtcdHealthArgv() []string {
	return []string{"curl", "--silent", "--fail", "--max-time", "5", "http://" + EtcdEndpoint + "/health"}
}

// Lifecycle-agent checks the standalone etcd's health every second for at most a minute.
const (
	EtcdHealthPoll    = time.Second
	EtcdHealthTimeout = time.Minute
)

// WaitEtcd polls the standalone etcd's health through run (a command on the node) until
// it answers, within EtcdHealthTimeout.
func WaitEtcd(ctx context.Context, run func(ctx context.Context, name string, args ...string) ([]byte, error), clk clock.Clock) error {
	health := EtcdHealthArgv()
	_, why, err := clock.Wait(ctx, clk, EtcdHealthPoll, EtcdHealthTimeout, func(ctx context.Context) (bool, string, error) {
		if _, err := run(ctx, health[0], health[1:]...); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	switch {
	case errors.Is(err, clock.ErrWaitTimeout):
		return fmt.Errorf("etcd for recert not healthy within %s: %s", EtcdHealthTimeout, why)
	case err != nil:
		return fmt.Errorf("waiting for etcd for recert: %w", err)
	}
	return nil
}

// EtcdStopArgv stops the standalone etcd (--rm removes it).
func EtcdStopArgv() []string { return []string{"podman", "stop", EtcdContainer} }

// RunArgv runs recert from image with c, mounting each of Mounts(c) from under root (the
// node's root as this process sees it) at the same path (ops.go RunRecert).
func RunArgv(image, root string, c Config) []string {
	argv := []string{"podman", "run", "--rm", "--replace", "--name", RecertContainer, "--network=host", "--privileged"}
	for _, m := range Mounts(c) {
		argv = append(argv, "-v", path.Join(root, m)+":"+m)
	}
	return append(append(argv, image), Args(c)...)
}

// configFile is recert's RECERT_CONFIG document, with the keys lifecycle-agent writes
// (internal/recert/recert.go RecertConfig). recert takes its settings from the file and
// refuses command-line arguments beside it.
type configFile struct {
	EtcdEndpoint            string   `json:"etcd_endpoint,omitempty"`
	CryptoDirs              []string `json:"crypto_dirs,omitempty"`
	CryptoFiles             []string `json:"crypto_files,omitempty"`
	ClusterCustomizationDir []string `json:"cluster_customization_dirs,omitempty"`
	ClusterCustomizationFil []string `json:"cluster_customization_files,omitempty"`
	ClusterRename           string   `json:"cluster_rename,omitempty"`
	CNSANReplaceRules       []string `json:"cn_san_replace_rules,omitempty"`
	Hostname                string   `json:"hostname,omitempty"`
	IP                      []string `json:"ip,omitempty"`
	PullSecret              string   `json:"pull_secret,omitempty"`
	KubeadminPasswordHash   *string  `json:"kubeadmin_password_hash,omitempty"`
	UseKeyRules             []string `json:"use_key_rules,omitempty"`
	UseCertRules            []string `json:"use_cert_rules,omitempty"`
	ChronyConfig            string   `json:"chrony_config,omitempty"`
	Proxy                   string   `json:"proxy,omitempty"`
	UserCABundle            string   `json:"user_ca_bundle,omitempty"`
	ProxyTrustedCABundle    string   `json:"proxy_trusted_ca_bundle,omitempty"`
	RegenerateServerSSHKeys string   `json:"regenerate_server_ssh_keys,omitempty"`
	SummaryFileClean        string   `json:"summary_file_clean,omitempty"`
	ExtendExpiration        bool     `json:"extend_expiration,omitempty"`
	ForceExpire             bool     `json:"force_expire,omitempty"`
	EtcdDefrag              bool     `json:"etcd_defrag,omitempty"`
}

// ConfigJSON is c as a RECERT_CONFIG file. The file is how lifecycle-agent runs recert, and
// the only way to force expiry and defragment etcd in one run (on the command line clap
// groups the two as exclusive; the file's parser allows both, and refuses force_expire with
// extend_expiration).
func ConfigJSON(c Config) ([]byte, error) {
	if c.ForceExpire && c.ExtendExpiration {
		return nil, errors.New("recert: force_expire and extend_expiration exclude each other")
	}
	return json.MarshalIndent(configFile{
		EtcdEndpoint: c.EtcdEndpoint, CryptoDirs: c.CryptoDirs, CryptoFiles: c.CryptoFiles,
		ClusterCustomizationDir: c.CustomizationDirs, ClusterCustomizationFil: c.CustomizationFiles,
		ClusterRename: c.ClusterRename, CNSANReplaceRules: c.CNSANReplace, Hostname: c.Hostname, IP: c.IPs,
		PullSecret: c.PullSecret, KubeadminPasswordHash: c.KubeadminPasswordHash, UseKeyRules: c.UseKeys,
		UseCertRules: c.UseCerts, ChronyConfig: c.ChronyConfig, Proxy: c.Proxy, UserCABundle: c.UserCABundle, ProxyTrustedCABundle: c.ProxyTrustedCABundle,
		RegenerateServerSSHKeys: c.RegenerateServerSSHKeys,
		SummaryFileClean:        c.SummaryFileClean, ExtendExpiration: c.ExtendExpiration, ForceExpire: c.ForceExpire,
		EtcdDefrag: c.EtcdDefrag,
	}, "", "  ")
}

// RunConfigArgv runs recert from image with its settings in the RECERT_CONFIG file
// configPath (a node path, written from ConfigJSON(c)), mounting what c names and the
// file's directory.
func RunConfigArgv(image, root, configPath string, c Config) []string {
	argv := []string{"podman", "run", "--rm", "--replace", "--name", RecertContainer, "--network=host", "--privileged"}
	mounts := Mounts(c)
	if d := path.Dir(configPath); !slices.Contains(mounts, d) {
		mounts = append(mounts, d)
	}
	for _, m := range mounts {
		argv = append(argv, "-v", path.Join(root, m)+":"+m)
	}
	return append(argv, "--env", "RECERT_CONFIG="+configPath, image)
}

// UserCABundleConfigMap is the ConfigMap of the cluster's additional trust bundle. As the
// proxy_trusted_ca_bundle's name it takes no bundle: recert uses user_ca_bundle's
// (src/ocp_postprocess.rs additional_trust_bundle_rename), and lifecycle-agent writes it so
// (internal/recert/recert.go SetRecertTrustedCaBundleFromSeedReconfigAdditionaTrustBundle).
const UserCABundleConfigMap = "user-ca-bundle"

// ProxySettings is one side of a proxy: the Proxy CR's spec or its status.
type ProxySettings struct{ HTTP, HTTPS, No string }

// FormatProxy is recert's proxy value, the spec's three fields then the status's, as
// lifecycle-agent writes it (internal/recert/recert.go FormatRecertProxyFromSeedReconfigProxy)
// and recert reads it (src/ocp_postprocess/proxy_rename/args.rs Proxy::parse).
func FormatProxy(spec, status ProxySettings) string {
	return strings.Join([]string{spec.HTTP, spec.HTTPS, spec.No, status.HTTP, status.HTTPS, status.No}, "|")
}
