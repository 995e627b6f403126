package agent

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sync/errgroup"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/recert"
	"github.com/snofactory/snofactory/seeds/node/seedinfo"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

// Node paths of an OpenShift seal.
const (
	// LocalhostKubeConfig is the SNO control plane's localhost admin kubeconfig.
	LocalhostKubeConfig = "/etc/kubernetes/static-pod-resources/kube-apiserver-certs/secrets/node-kubeconfigs/localhost.kubeconfig"
	// SealWorkDir holds what the seal writes for its own use: the placeholder pull secret and
	// the seed-time recert configuration (lifecycle-agent's /var/tmp/backup).
	SealWorkDir = "/var/lib/snofactory/seal"
	// RecertSeedSummary is the seed-time recert's clean summary, which ships in the seed as
	// the proof recert handled this cluster (lifecycle-agent's path).
	RecertSeedSummary = "/etc/kubernetes/recert-seed-creation-summary.yaml"
	// ReconfigureUnitPath is where the seal installs the reconfiguration service: under
	// /etc/systemd/system itself, outside every MachineConfig, so the machine-config daemon
	// never sees it as drift; the hook disables it once it succeeded.
	ReconfigureUnitPath = "/etc/systemd/system/" + wire.ReconfigureUnitName
	// ReconfiguredFile marks a finished site reconfiguration (the unit's condition).
	ReconfiguredFile = "/var/lib/snofactory/reconfigured"
	// AgentPath is where the seal installs the agent the site's hook runs.
	AgentPath = wire.AgentPath
)

// PlaceholderPullSecret is what replaces the cluster's pull secret before the seed is cut:
// lifecycle-agent's (internal/common/consts.go PullSecretEmptyData), one fake auth, so
// neither the MCO nor CRI-O chokes on an empty secret.
const PlaceholderPullSecret = `{"auths":{"registry.connect.redhat.com":{"username":"empty","password":"empty","auth":"ZW1wdHk6ZW1wdHk=","email":""}}}`

// ReconfigureUnit is the unit the seal installs. It is ordered after update-ca-trust as
// lifecycle-agent's installation-configuration.service is (update-ca-trust is not safe to
// run twice at once), and restarts on failure: each step it finished is recorded. It also
// wants and follows sshd-keygen.target, so host keys exist before the site's recert
// replaces them even if something removed them: recert stops when it finds none (recert
// src/server_ssh_keys.rs remove_old_keys). RHEL's and Fedora's openssh-server ship the
// target, which wants sshd-keygen@{rsa,ecdsa,ed25519}.service, each run only while its key
// is missing (ConditionFileNotEmpty=|!/etc/ssh/ssh_host_%i_key); a target is ordered after
// what it wants (systemd.target(5)). lifecycle-agent orders only after update-ca-trust: it
// counts on the seed's keys, which this seal keeps too.
const ReconfigureUnit = `[Unit]
Description=snofactory: apply the site configuration to a relocated seed
Wants=network-online.target sshd-keygen.target
After=network-online.target coreos-update-ca-trust.service sshd-keygen.target
ConditionPathExists=!` + ReconfiguredFile + `

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + AgentPath + ` agent reconfigure
Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
`

// sealEtcdDataDir is the node's etcd database, which the seed-time recert edits.
const sealEtcdDataDir = "/var/lib/etcd"

// oc is an oc command line against the local API.
func (s Sealer) oc(args ...string) []string {
	return append([]string{"oc", "--kubeconfig", s.under(s.KubeConfig)}, args...)
}

// openshiftActions follow lifecycle-agent's seed creation: the operator's clean-up
// through the API (seedgen_controller.go), then `lca-cli create` (seedcreator.go,
// ops.go StopClusterServices, ForceExpireSeedCrypto).
func (s Sealer) openshiftActions() []sealAction {
	var hasKubeadmin bool // read with the cluster, used by recert
	acts := s.readClusterActions(&hasKubeadmin)
	acts = append(acts, s.finishedPodsActions()...)
	if !s.Request.KeepPullSecret {
		acts = append(acts, s.pullSecretActions()...)
	}
	acts = append(acts, s.stopServicesActions()...)
	acts = append(acts, s.seedRecertActions(path.Join(SealWorkDir, "recert_config.json"), &hasKubeadmin)...)
	return append(acts, s.rollbackAction())
}

// finishedPodsActions delete every pod that has run to its end, the Succeeded ones, then
// the Failed ones (lifecycle-agent controllers/seedgen_controller.go deletePodsWithPhase):
// installer and pruner pods of the factory would otherwise sit in every site's cluster.
func (s Sealer) finishedPodsActions() []sealAction {
	var acts []sealAction
	for _, phase := range []string{"Succeeded", "Failed"} {
		argv := s.oc("delete", "pods", "--all-namespaces", "--field-selector=status.phase=="+phase)
		acts = append(acts, s.cmd("pods-"+strings.ToLower(phase), "the factory's pods in phase "+phase+" deleted", []string{"Pod */*"}, argv...))
	}
	return acts
}

// readClusterActions wait for the API, read the cluster's objects and write the seed
// cluster info from them; hasKubeadmin is set to whether a kubeadmin secret exists.
func (s Sealer) readClusterActions(hasKubeadmin *bool) []sealAction {
	var objects, nodes []byte
	readyz := s.oc("get", "--raw", "/readyz")
	getObjects := s.oc("get", "-n", "kube-system", "--ignore-not-found", "-o", "json",
		"clusterversion.config.openshift.io/version", "infrastructure.config.openshift.io/cluster",
		"configmap/cluster-config-v1", "secret/kubeadmin")
	getNodes := s.oc("get", "nodes", "-o", "json")
	getRouterCA := s.oc("get", "-n", "openshift-ingress-operator", "--ignore-not-found", "-o", "json", "secret/router-ca")
	return []sealAction{
		{steps.Step{Name: "api", Argv: readyz, Detail: "wait for the local API: the cluster is read and cleaned through it"}, func(ctx context.Context) (string, error) {
			return s.waitAPI(ctx, readyz)
		}},
		{steps.Step{Name: "read-cluster", Argv: getObjects, Detail: "ClusterVersion, Infrastructure, install-config and whether a kubeadmin secret exists"}, func(ctx context.Context) (string, error) {
			out, err := s.Run(ctx, getObjects[0], getObjects[1:]...)
			objects = out
			return "read", err
		}},
		{steps.Step{Name: "read-node", Argv: getNodes, Detail: "the Node's InternalIP and Hostname addresses"}, func(ctx context.Context) (string, error) {
			out, err := s.Run(ctx, getNodes[0], getNodes[1:]...)
			nodes = out
			return "read", err
		}},
		{steps.Step{Name: "seed-identity", Argv: getRouterCA, Changes: []string{seedinfo.File}, Detail: "the seed cluster info, from cluster objects (never /etc/hostname)"}, func(ctx context.Context) (string, error) {
			ca, err := s.Run(ctx, getRouterCA[0], getRouterCA[1:]...)
			if err != nil {
				return "", err
			}
			return s.writeSeedInfo(objects, nodes, ca, hasKubeadmin)
		}},
	}
}

// writeSeedInfo writes the seed cluster info read from the cluster's objects, nodes and
// router CA, and sets hasKubeadmin.
func (s Sealer) writeSeedInfo(objects, nodes, ca []byte, hasKubeadmin *bool) (string, error) {
	info, kubeadmin, err := seedInfo(objects, nodes, ca)
	if err != nil {
		return "", err
	}
	*hasKubeadmin = kubeadmin
	info.RecertImage = s.Request.RecertImage
	b, err := info.Marshal()
	if err != nil {
		return "", err
	}
	if err := writeUnder(s.Root, seedinfo.File, bytes.TrimSuffix(b, []byte("\n")), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s.%s, node %s (%s)", info.ClusterName, info.BaseDomain, info.Hostname, strings.Join(info.NodeIPs, ",")), nil
}

// pullSecretActions take the build's pull secret out of the cluster: a placeholder in
// through the API, the MCO's rollout of it awaited, the rendered configs that still embed
// the old one deleted.
func (s Sealer) pullSecretActions() []sealAction {
	placeholder := path.Join(SealWorkDir, "placeholder-pull-secret.json")
	setPlaceholder := s.oc("-n", "openshift-config", "set", "data", "secret/pull-secret", "--from-file=.dockerconfigjson="+s.under(placeholder))
	getPools := s.oc("get", "machineconfigpools.machineconfiguration.openshift.io", "-o", "json")
	getConfigs := s.oc("get", "machineconfigs.machineconfiguration.openshift.io", "-o", "json")
	return []sealAction{
		sealAction{steps.Step{Name: "pull-secret-placeholder", Argv: setPlaceholder, Changes: []string{"Secret openshift-config/pull-secret", placeholder},
			Detail: "the build's pull secret leaves etcd: a placeholder goes in through the API"}, func(ctx context.Context) (string, error) {
			if err := writeUnder(s.Root, placeholder, []byte(PlaceholderPullSecret), 0o600); err != nil {
				return "", err
			}
			if _, err := s.Run(ctx, setPlaceholder[0], setPlaceholder[1:]...); err != nil {
				return "", err
			}
			return "openshift-config/pull-secret set to the placeholder", nil
		}},
		// The MCO, not the seal, writes the node's files here, each as its MachineConfig says.
		sealAction{steps.Step{Name: "pull-secret-rollout", Argv: getPools,
			Detail: "wait until the MCO wrote the placeholder to " + kubeletAuthFile + " and currentconfig and every pool is ready, so no rendered config keeps the old secret"}, func(ctx context.Context) (string, error) {
			return s.waitPullSecretRollout(ctx, getPools)
		}},
		sealAction{steps.Step{Name: "old-rendered-configs", Argv: getConfigs, Changes: []string{"MachineConfig rendered-*"},
			Detail: "every rendered-* no pool references: they still embed the old pull secret"}, func(ctx context.Context) (string, error) {
			return s.deleteOldRenderedConfigs(ctx, getPools, getConfigs)
		}},
	}
}

// stopServicesActions stop kubelet, the containers, their sandboxes and CRI-O; when CRI-O
// is already down the container steps are skipped.
func (s Sealer) stopServicesActions() []sealAction {
	crioDown := false
	return []sealAction{
		// kubelet goes first so nothing re-creates the pods that are stopped next.
		s.cmd("kubelet-stop", "kubelet first, so nothing re-creates pods", nil, "systemctl", "stop", "kubelet.service"),
		s.cmd("kubelet-disable", "it starts again only after the site's reconfiguration", []string{"/etc/systemd/system/multi-user.target.wants/kubelet.service"}, "systemctl", "disable", "kubelet.service"),
		sealAction{steps.Step{Name: "crio-active", Argv: []string{"systemctl", "is-active", "crio"}, Detail: "exit 3: CRI-O is already down and the next three steps are skipped"}, func(ctx context.Context) (string, error) {
			_, err := s.Run(ctx, "systemctl", "is-active", "crio")
			switch {
			case err == nil:
				return "active", nil
			case exitCode(err) == 3:
				crioDown = true
				return "inactive: containers, sandboxes and CRI-O are already down", nil
			}
			return "", err
		}},
		sealAction{steps.Step{Name: "containers-stop", Argv: []string{"crictl", "ps", "-q"}, Detail: "then crictl stop --timeout 5 for each running container, 10 at once (failures ignored)"}, func(ctx context.Context) (string, error) {
			if crioDown {
				return "skipped: CRI-O is down", nil
			}
			return s.eachID(ctx, []string{"crictl", "ps", "-q"}, []string{"crictl", "stop", "--timeout", "5"}, "stopped", containerStops)
		}},
		// A leftover sandbox costs CRI-O up to a minute of CNI checks at its next start.
		sealAction{steps.Step{Name: "sandboxes-remove", Argv: []string{"crictl", "pods", "-q"}, Detail: "then crictl rmp -f for each pod sandbox (a failure is a warning)"}, func(ctx context.Context) (string, error) {
			if crioDown {
				return "skipped: CRI-O is down", nil
			}
			return s.eachID(ctx, []string{"crictl", "pods", "-q"}, []string{"crictl", "rmp", "-f"}, "removed", 1)
		}},
		sealAction{steps.Step{Name: "crio-stop", Argv: []string{"systemctl", "stop", "crio.service"}, Detail: "stopped, not disabled"}, func(ctx context.Context) (string, error) {
			if crioDown {
				return "skipped: CRI-O is down", nil
			}
			_, err := s.Run(ctx, "systemctl", "stop", "crio.service")
			return "stopped", err
		}},
	}
}

// seedRecertActions run the seed-time recert (lifecycle-agent ops.go ForceExpireSeedCrypto):
// every certificate's life ends now and etcd is defragmented, which proves recert handles
// this cluster before it ships, and a seed cannot be booted as it is by accident.
func (s Sealer) seedRecertActions(configPath string, hasKubeadmin *bool) []sealAction {
	etcd := recert.EtcdArgv(s.Request.EtcdImage, s.under(sealEtcdDataDir))
	stop := recert.EtcdStopArgv()
	cfg := func() recert.Config {
		return recert.Config{EtcdEndpoint: recert.EtcdEndpoint,
			CryptoDirs: s.existing(recert.CryptoDirs()), CryptoFiles: s.existing(recert.CryptoFiles()),
			CustomizationDirs: s.existing(recert.CustomizationDirs()), CustomizationFiles: s.existing(recert.CustomizationFiles()),
			ForceExpire: true, EtcdDefrag: true, SummaryFileClean: RecertSeedSummary}
	}
	run := recert.RunConfigArgv(s.Request.RecertImage, s.Root, configPath, cfg())
	return []sealAction{
		{steps.Step{Name: "recert-etcd", Argv: etcd, Detail: "the node's etcd database, unauthenticated on localhost:2379, while kubelet is down"}, func(ctx context.Context) (string, error) {
			if _, err := s.Run(ctx, etcd[0], etcd[1:]...); err != nil {
				return "", fmt.Errorf("starting etcd for recert: %w", err)
			}
			if err := recert.WaitEtcd(ctx, s.Run, s.Clock); err != nil {
				s.stopEtcd(ctx, stop)
				return "", err
			}
			return "healthy", nil
		}},
		{steps.Step{Name: "recert", Argv: run, Changes: seedRecertChanges(configPath, cfg()),
			Detail: "force_expire + etcd_defrag; a disposable kubeadmin hash, so no factory password ships; pull_secret = the placeholder the MCO rolled out, " +
				"which recert writes into every copy it knows, " + recert.CustomizationFiles()[0] + " included"}, func(ctx context.Context) (string, error) {
			defer s.stopEtcd(ctx, stop)
			return s.runSeedRecert(ctx, configPath, cfg(), *hasKubeadmin)
		}},
		{steps.Step{Name: "recert-etcd-stop", Argv: stop, Detail: "run when recert ends, on success or failure"}, func(ctx context.Context) (string, error) {
			return "stopped", nil // the recert step stops it on every path
		}},
	}
}

// runSeedRecert writes the seed-time recert configuration and runs recert with it.
func (s Sealer) runSeedRecert(ctx context.Context, configPath string, c recert.Config, hasKubeadmin bool) (string, error) {
	// The kubeadmin secret must survive (recert can update it, not create it), but no
	// password may open it: the hash of 72 random bytes nobody keeps.
	hash := ""
	if hasKubeadmin {
		h, err := disposableHash(s.Rand)
		if err != nil {
			return "", err
		}
		hash = h
	}
	c.KubeadminPasswordHash = &hash
	// The MCO rewrote the kubelet's file, currentconfig and the MachineConfigs, never
	// /etc/mcs-machine-config-content.json: Ignition wrote that once, from the machine-config
	// server's first config, build pull secret included (machine-config-operator
	// pkg/server/server.go appendInitialMachineConfig). Given the bytes the MCO wrote, recert
	// rewrites that file too (recert src/ocp_postprocess/pull_secret_rename/
	// filesystem_rename.rs fix_filesystem_mcs_machine_config_content) and writes the others
	// with what they already hold, so no MachineConfig-owned file changes
	// (fix_filesystem_currentconfig, fix_filesystem_pull_secret; etcd_rename.rs
	// fix_machineconfigs, fix_pull_secret_secret). lifecycle-agent gives its seed-time recert
	// no pull secret (internal/recert/recert.go CreateRecertConfigFileForSeedCreation) and
	// ships that file as it is; its site run rewrites it.
	if !s.Request.KeepPullSecret {
		if err := s.holdsPlaceholder(kubeletAuthFile); err != nil {
			return "", err
		}
		b, err := os.ReadFile(s.under(kubeletAuthFile))
		if err != nil {
			return "", fmt.Errorf("reading the placeholder pull secret: %w", err)
		}
		c.PullSecret = string(b)
	}
	b, err := recert.ConfigJSON(c)
	if err != nil {
		return "", err
	}
	if err := writeFileMode(s.under(configPath), b, 0o600); err != nil {
		return "", err
	}
	argv := recert.RunConfigArgv(s.Request.RecertImage, s.Root, configPath, c)
	if _, err := s.Run(ctx, argv[0], argv[1:]...); err != nil {
		return "", fmt.Errorf("recert: %w", err)
	}
	if _, err := os.Stat(s.under(RecertSeedSummary)); err != nil {
		return "", fmt.Errorf("recert left no summary at %s: %w", RecertSeedSummary, err)
	}
	return "certificates force-expired, etcd defragmented, summary " + RecertSeedSummary, nil
}

// seedRecertChanges is what the seed-time recert writes: its configuration and summary,
// every file under its crypto and customization directories and each of its files (where
// it re-signs certificates and keys, rewrites currentconfig and the kubelet's config.json
// with the pull secret), and in etcd the objects holding certificates and keys, every
// MachineConfig, the pull secret and kubeadmin secrets; it deletes every Lease and the
// node kubeconfigs and marks the ClusterVersion unavailable (recert src/ocp_postprocess.rs
// ocp_postprocess, run_cluster_customizations).
func seedRecertChanges(configPath string, c recert.Config) []string {
	out := []string{configPath, RecertSeedSummary}
	for _, d := range slices.Concat(c.CryptoDirs, c.CustomizationDirs) {
		if d = strings.TrimSuffix(d, "/") + "/"; !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, f := range slices.Concat(c.CryptoFiles, c.CustomizationFiles) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return append(out, "Secret */*", "ConfigMap */*", "MachineConfig *", "Secret openshift-config/pull-secret",
		"Secret kube-system/kubeadmin", "Lease */*", "Secret openshift-kube-apiserver/node-kubeconfigs", "ClusterVersion version")
}

// reconfigureUnitActions install the site's hook outside every MachineConfig and enable it.
func (s Sealer) reconfigureUnitActions() []sealAction {
	enable := []string{"systemctl", "enable", wire.ReconfigureUnitName}
	return []sealAction{
		{steps.Step{Name: "reconfigure-unit", Changes: []string{ReconfigureUnitPath}, Detail: "written outside MachineConfigs, so the MCD sees no drift"}, func(context.Context) (string, error) {
			return ReconfigureUnitPath, writeFileMode(s.under(ReconfigureUnitPath), []byte(ReconfigureUnit), 0o644)
		}},
		s.cmd("reconfigure-enable", "the site's first boot runs it", []string{"/etc/systemd/system/multi-user.target.wants/" + wire.ReconfigureUnitName}, enable...),
	}
}

func (s Sealer) stopEtcd(ctx context.Context, stop []string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := s.Run(sctx, stop[0], stop[1:]...); err != nil {
		fmt.Fprintf(s.Warn, "stopping the etcd recert used: %v\n", err)
	}
}

// existing keeps the node paths present under the root: recert refuses a missing one.
func (s Sealer) existing(paths []string) []string {
	if s.planOnly {
		return paths // a dry run shows every path recert may be given
	}
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(s.under(p)); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitAPI polls /readyz until the API answers ok, within APITimeout.
func (s Sealer) waitAPI(ctx context.Context, readyz []string) (string, error) {
	took, err := WaitAPI(ctx, s.Run, s.Clock, readyz, 5*time.Second, s.APITimeout)
	if err != nil {
		return "", err
	}
	return "ready after " + took.Round(time.Second).String(), nil
}

// WaitAPI asks the node's API for /readyz through argv (oc get --raw /readyz) every
// interval until it answers ok, within timeout; the error names the last answer. The seal
// and the site's reconfiguration both wait for the API this way.
func WaitAPI(ctx context.Context, run func(ctx context.Context, name string, args ...string) ([]byte, error), clk clock.Clock, argv []string, interval, timeout time.Duration) (time.Duration, error) {
	took, why, err := clock.Wait(ctx, clk, interval, timeout, func(ctx context.Context) (bool, string, error) {
		out, err := run(ctx, argv[0], argv[1:]...)
		switch {
		case err != nil:
			return false, err.Error(), nil
		case strings.TrimSpace(string(out)) != "ok":
			return false, "answered " + strings.TrimSpace(string(out)), nil
		}
		return true, "", nil
	})
	switch {
	case errors.Is(err, clock.ErrWaitTimeout):
		return took, fmt.Errorf("the local API did not answer /readyz ok within %s (last: %s): is the cluster up?", timeout, why)
	case err != nil:
		return took, fmt.Errorf("waiting for the local API: %w", err)
	}
	return took, nil
}

// pools are MachineConfigPools, as much as the seal reads of them.
type pools struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Configuration struct {
				Name string `json:"name"`
			} `json:"configuration"`
		} `json:"spec"`
		Status struct {
			Configuration struct {
				Name string `json:"name"`
			} `json:"configuration"`
			MachineCount      int `json:"machineCount"`
			ReadyMachineCount int `json:"readyMachineCount"`
		} `json:"status"`
	} `json:"items"`
}

func (s Sealer) readPools(ctx context.Context, get []string) (pools, error) {
	var p pools
	out, err := s.Run(ctx, get[0], get[1:]...)
	if err != nil {
		return p, err
	}
	if err := strictjson.DecodeOpen(out, &p); err != nil {
		return p, fmt.Errorf("reading MachineConfigPools: %w", err)
	}
	return p, nil
}

// waitPullSecretRollout waits until the node's config.json holds the placeholder and every
// pool has all its machines ready (lifecycle-agent waitForPullSecretOverride).
func (s Sealer) waitPullSecretRollout(ctx context.Context, getPools []string) (string, error) {
	want := canonicalJSON([]byte(PlaceholderPullSecret))
	pools := 0
	took, why, err := clock.Wait(ctx, s.Clock, s.PullSecretPoll, s.PullSecretTimeout, func(ctx context.Context) (bool, string, error) {
		// Both are read on every poll, as lifecycle-agent does: the pools, then the file.
		p, err := s.readPools(ctx, getPools)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, it := range p.Items {
			if it.Status.ReadyMachineCount != it.Status.MachineCount {
				return false, fmt.Sprintf("pool %s has %d of %d machines ready", it.Metadata.Name, it.Status.ReadyMachineCount, it.Status.MachineCount), nil
			}
		}
		b, err := os.ReadFile(s.under("/var/lib/kubelet/config.json"))
		switch {
		case err != nil:
			return false, fmt.Sprintf("the node's pull secret cannot be read: %v", err), nil
		case canonicalJSON(b) != want:
			return false, "the node's /var/lib/kubelet/config.json does not hold the placeholder yet", nil
		}
		pools = len(p.Items)
		return true, "", nil
	})
	switch {
	case errors.Is(err, clock.ErrWaitTimeout):
		return "", fmt.Errorf("the placeholder pull secret was not rolled out within %s: %s", s.PullSecretTimeout, why)
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("the MCO rolled the placeholder out to %d pools after %s", pools, took.Round(time.Second)), nil
}

// deleteOldRenderedConfigs deletes every rendered-* MachineConfig no pool uses (lifecycle-
// agent cleanupOldRenderedMachineConfigs): they embed the build's pull secret.
func (s Sealer) deleteOldRenderedConfigs(ctx context.Context, getPools, getConfigs []string) (string, error) {
	p, err := s.readPools(ctx, getPools)
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, it := range p.Items {
		used[it.Spec.Configuration.Name] = true
		used[it.Status.Configuration.Name] = true
	}
	out, err := s.Run(ctx, getConfigs[0], getConfigs[1:]...)
	if err != nil {
		return "", err
	}
	var mcs struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := strictjson.DecodeOpen(out, &mcs); err != nil {
		return "", fmt.Errorf("reading MachineConfigs: %w", err)
	}
	var old []string
	for _, mc := range mcs.Items {
		if n := mc.Metadata.Name; strings.HasPrefix(n, "rendered-") && !used[n] {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return "none", nil
	}
	del := s.oc(append([]string{"delete", "machineconfigs.machineconfiguration.openshift.io"}, old...)...)
	if _, err := s.Run(ctx, del[0], del[1:]...); err != nil {
		return "", err
	}
	return "deleted " + strings.Join(old, ", "), nil
}

// containerStops is how many containers lifecycle-agent stops at once (lca-cli/ops/ops.go
// StopClusterServices: crictl ps -q | xargs --max-args 1 --max-procs 10 crictl stop).
const containerStops = 10

// eachID lists IDs with list and runs each with one ID, up to limit at once; failures are
// warnings, as upstream ignores them. A cancelled ctx starts no more and fails the step.
func (s Sealer) eachID(ctx context.Context, list, each []string, verb string, limit int) (string, error) {
	out, err := s.Run(ctx, list[0], list[1:]...)
	if err != nil {
		return "", err
	}
	ids := strings.Fields(string(out))
	var failed atomic.Int32
	var warn sync.Mutex
	var g errgroup.Group
	g.SetLimit(limit)
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil { // cancelled while this one waited for a place
				return nil
			}
			argv := append(slices.Clone(each), id)
			if _, err := s.Run(ctx, argv[0], argv[1:]...); err != nil {
				failed.Add(1)
				warn.Lock()
				fmt.Fprintf(s.Warn, "warning: %v\n", err)
				warn.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every Go returns nil: failures are warnings
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(each, " "), err)
	}
	if n := int(failed.Load()); n > 0 {
		return fmt.Sprintf("%d of %d %s (%d failed: warnings)", len(ids)-n, len(ids), verb, n), nil
	}
	return fmt.Sprintf("%d %s", len(ids), verb), nil
}

// disposableHash is a bcrypt hash (default cost) of 72 random bytes nobody keeps
// (lifecycle-agent recert.go generateDisposablePasswordHash).
func disposableHash(r io.Reader) (string, error) {
	pw := make([]byte, 72)
	if _, err := io.ReadFull(r, pw); err != nil {
		return "", fmt.Errorf("making a disposable kubeadmin password: %w", err)
	}
	h, err := bcrypt.GenerateFromPassword(pw, bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hashing a disposable kubeadmin password: %w", err)
	}
	return string(h), nil
}

// seedInfo reads the seed cluster info out of the List oc printed for the cluster objects,
// the Node list and the router CA secret (lifecycle-agent utils/client_helper.go
// GetClusterInfo). It also says whether a kubeadmin secret exists.
func seedInfo(objects, nodes, routerCA []byte) (seedinfo.Info, bool, error) {
	var info seedinfo.Info
	hasKubeadmin, err := clusterObjectsInto(&info, objects)
	if err != nil {
		return info, false, err
	}
	if err := nodeInto(&info, nodes); err != nil {
		return info, false, err
	}
	if len(bytes.TrimSpace(routerCA)) > 0 {
		cn, err := routerCACN(routerCA)
		if err != nil {
			return info, false, err
		}
		info.IngressCertificateCN = cn
	}
	if err := info.Check(); err != nil {
		return info, false, err
	}
	return info, hasKubeadmin, nil
}

// clusterObjectsInto fills info from the ClusterVersion, the Infrastructure and the
// install-config, and tells whether the kubeadmin secret exists.
func clusterObjectsInto(info *seedinfo.Info, objects []byte) (bool, error) {
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				ClusterID string `json:"clusterID"`
			} `json:"spec"`
			Status struct {
				Desired struct {
					Version string `json:"version"`
					Image   string `json:"image"`
				} `json:"desired"`
				InfrastructureName string `json:"infrastructureName"`
			} `json:"status"`
			Data map[string]string `json:"data"`
		} `json:"items"`
	}
	if err := strictjson.DecodeOpen(objects, &list); err != nil {
		return false, fmt.Errorf("reading the cluster objects: %w", err)
	}
	hasKubeadmin, haveInstallConfig := false, false
	for _, it := range list.Items {
		switch it.Kind {
		case "ClusterVersion":
			info.OCPVersion, info.ClusterID = it.Status.Desired.Version, it.Spec.ClusterID
			if ref := it.Status.Desired.Image; ref != "" {
				info.ReleaseRegistry, _, _ = strings.Cut(ref, "/")
			}
		case "Infrastructure":
			info.InfraID = it.Status.InfrastructureName
		case "Secret":
			hasKubeadmin = it.Metadata.Name == "kubeadmin"
		case "ConfigMap":
			if err := installConfigInto(info, it.Data["install-config"]); err != nil {
				return false, err
			}
			haveInstallConfig = true
		}
	}
	if !haveInstallConfig {
		return false, errors.New("the cluster has no kube-system/cluster-config-v1: the seed's name and domain are unknown")
	}
	return hasKubeadmin, nil
}

// installConfigInto fills info from the install-config kept in kube-system/cluster-config-v1.
func installConfigInto(info *seedinfo.Info, installConfig string) error {
	var ic struct {
		BaseDomain string `yaml:"baseDomain"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Networking struct {
			MachineNetwork []struct {
				CIDR string `yaml:"cidr"`
			} `yaml:"machineNetwork"`
			ClusterNetwork []struct {
				CIDR string `yaml:"cidr"`
			} `yaml:"clusterNetwork"`
			ServiceNetwork []string `yaml:"serviceNetwork"`
		} `yaml:"networking"`
		Proxy *struct{} `yaml:"proxy"`
		FIPS  bool      `yaml:"fips"`
	}
	if err := yaml.Unmarshal([]byte(installConfig), &ic); err != nil {
		return fmt.Errorf("reading the install-config in kube-system/cluster-config-v1: %w", err)
	}
	info.BaseDomain, info.ClusterName, info.HasProxy, info.HasFIPS = ic.BaseDomain, ic.Metadata.Name, ic.Proxy != nil, ic.FIPS
	for _, n := range ic.Networking.MachineNetwork {
		info.MachineNetworks = append(info.MachineNetworks, n.CIDR)
	}
	for _, n := range ic.Networking.ClusterNetwork {
		info.ClusterNetworks = append(info.ClusterNetworks, n.CIDR)
	}
	info.ServiceNetworks = ic.Networking.ServiceNetwork
	return nil
}

// nodeInto fills info's hostname and node IPs (IPv4 first) from the single Node.
func nodeInto(info *seedinfo.Info, nodes []byte) error {
	var nl struct {
		Items []struct {
			Status struct {
				Addresses []struct {
					Type    string `json:"type"`
					Address string `json:"address"`
				} `json:"addresses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := strictjson.DecodeOpen(nodes, &nl); err != nil {
		return fmt.Errorf("reading the Node: %w", err)
	}
	if len(nl.Items) != 1 {
		return fmt.Errorf("a single-node seed has %d Nodes", len(nl.Items))
	}
	var v4, v6 []string
	for _, a := range nl.Items[0].Status.Addresses {
		switch a.Type {
		case "Hostname":
			info.Hostname = a.Address
		case "InternalIP":
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				v4 = append(v4, a.Address)
			} else {
				v6 = append(v6, a.Address)
			}
		}
	}
	info.NodeIPs = append(v4, v6...)
	return nil
}

// routerCACN is the CN of the ingress operator's router CA (ingress-operator@<unix time>).
func routerCACN(secret []byte) (string, error) {
	var sec struct {
		Data map[string]string `json:"data"`
	}
	if err := strictjson.DecodeOpen(secret, &sec); err != nil {
		return "", fmt.Errorf("reading the router CA: %w", err)
	}
	der, err := base64.StdEncoding.DecodeString(sec.Data["tls.crt"])
	if err != nil {
		return "", fmt.Errorf("reading the router CA: %w", err)
	}
	blk, _ := pem.Decode(der)
	if blk == nil {
		return "", errors.New("reading the router CA: tls.crt holds no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("reading the router CA: %w", err)
	}
	return c.Subject.CommonName, nil
}

// canonicalJSON compacts a JSON document so formatting does not decide equality.
func canonicalJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	c, _ := json.Marshal(v)
	return string(c)
}

// writeFileMode writes a file, creating its directory, with the mode set even when the
// file existed.
func writeFileMode(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}
