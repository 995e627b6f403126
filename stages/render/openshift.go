package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/vincent-petithory/dataurl"
)

// renderOpenShift renders a single-node bootstrap-in-place install: the install config and
// render's extra manifests go to manifests/, openshift-install turns them into config.ign,
// and its credentials are kept beside it.
func renderOpenShift(ctx context.Context, opts Options, env *runEnv, rep *Report) error {
	c, variant, err := releaseToInstall(opts, env, rep)
	if err != nil {
		return err
	}
	installer, err := findInstaller(opts, env)
	if err != nil {
		return err
	}
	secrets, err := readInstallSecrets(opts, env)
	if err != nil {
		return err
	}
	icPath := ManifestDir + "/install-config.yaml"
	// 0600: with KeepSecrets it holds the pull secret.
	if err := writeInstallConfig(env.out, icPath, c, secrets.kept(opts.KeepSecrets), 0o600); err != nil {
		return err
	}
	rep.Manifests = append(rep.Manifests, ManifestFile{Path: icPath, Kind: "InstallConfig", Name: c.ClusterName, Redacted: !opts.KeepSecrets})
	rep.Cluster = clusterReport(installConfig(c, "", ""))
	var live netip.Prefix
	if opts.Relocation != nil {
		if live, err = bootstrapAddress(c, *opts.Relocation); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	extras, err := openshiftManifests(ctx, opts, variant, rep)
	if err != nil {
		return err
	}
	if err := writeManifests(env, extras, rep); err != nil {
		return err
	}
	ign, err := runInstaller(ctx, env, installer, c, secrets, extras, live, rep)
	if err != nil {
		return err
	}
	if opts.WorkerIgnition {
		return writeWorkerPointer(env, c, ign, rep)
	}
	return nil
}

// releaseToInstall is the cluster with the release the installer must install pinned (see
// pinRelease), and the Butane openshift variant of its version.
func releaseToInstall(opts Options, env *runEnv, rep *Report) (*OpenShift, string, error) {
	c, release, err := pinRelease(env, effectiveCluster(opts))
	if err != nil {
		return nil, "", err
	}
	rep.Release = release
	env.log.Info("release to install", "image", release.Image, "version", release.Version, "from", release.From)
	variant, err := butaneOpenShiftVersion(c.Version)
	if err != nil {
		return nil, "", fmt.Errorf("openshift.version: %w", err)
	}
	return c, variant, nil
}

// effectiveCluster is opts.OpenShift with the machine network defaulted to the relocation
// subnet: the node IP must lie in the machine network, and with relocation the node IP is the
// internal address (blueprint validation refuses an explicit machine network that misses it).
func effectiveCluster(opts Options) *OpenShift {
	c := *opts.OpenShift
	if r := opts.Relocation; r != nil && len(c.MachineNetwork) == 0 {
		if p, err := netip.ParsePrefix(r.InternalIP); err == nil {
			c.MachineNetwork = []string{p.Masked().String()}
		}
	}
	return &c
}

// installSecrets are the secrets install-config.yaml carries.
type installSecrets struct {
	pullSecret string // compact JSON: one line, as the installer documents it
	sshKey     string // "" when none is configured
}

// readInstallSecrets reads the pull secret and, when configured, the SSH key from the
// secrets channel. Errors never quote a value: they are credentials.
func readInstallSecrets(opts Options, env *runEnv) (installSecrets, error) {
	var s installSecrets
	pull, err := env.secrets.Secret(SecretPullSecret)
	if err != nil {
		return s, fmt.Errorf("render: %w", err)
	}
	var auths struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	var compact bytes.Buffer
	if json.Unmarshal(pull, &auths) != nil || auths.Auths == nil || json.Compact(&compact, pull) != nil {
		return s, fmt.Errorf("render: secret %s is not a pull secret (want JSON with an \"auths\" object)", SecretPullSecret)
	}
	s.pullSecret = compact.String()
	if opts.SSHKey {
		k, err := env.secrets.Secret(SecretSSHKey)
		if err != nil {
			return s, fmt.Errorf("render: %w", err)
		}
		s.sshKey = strings.TrimSpace(string(k))
	}
	return s, nil
}

// kept is what the copy of install-config.yaml kept in the outputs carries: placeholders
// (outputs are cached and may be shipped) unless keep asks for the real secrets.
func (s installSecrets) kept(keep bool) installSecrets {
	if keep {
		return s
	}
	k := installSecrets{pullSecret: redacted}
	if s.sshKey != "" {
		k.sshKey = redacted
	}
	return k
}

// writeInstallConfig writes the install-config.yaml of c carrying s at rel below dir.
func writeInstallConfig(dir, rel string, c *OpenShift, s installSecrets, perm os.FileMode) error {
	b, err := marshalYAML(installConfig(c, s.pullSecret, s.sshKey))
	if err != nil {
		return err
	}
	return writeFile(dir, rel, b, perm)
}

// writeManifests writes render's extra manifests into manifests/.
func writeManifests(env *runEnv, extras []extraManifest, rep *Report) error {
	seen := map[string]bool{}
	for _, m := range extras {
		if seen[m.name] {
			return fmt.Errorf("two manifests would be written as %s; rename one MachineConfig", m.name)
		}
		seen[m.name] = true
		if err := writeFile(env.out, ManifestDir+"/"+m.name, m.data, 0o644); err != nil {
			return err
		}
		env.log.Info("wrote manifest", "path", m.info.Path, "kind", m.info.Kind, "concern", m.info.Concern)
		rep.Manifests = append(rep.Manifests, m.info)
	}
	return nil
}

// writeWorkerPointer writes the day-2 worker config built from the bootstrap config ign.
func writeWorkerPointer(env *runEnv, c *OpenShift, ign []byte, rep *Report) error {
	w, err := workerPointer(c, ign)
	if err != nil {
		return err
	}
	if err := writeFile(env.out, WorkerPath, w, 0o644); err != nil {
		return err
	}
	rep.Ignition[handoff.ConfigWorker] = IgnitionFile{Path: WorkerPath, Version: "3.2.0", Size: len(w)}
	return nil
}

// workerPointer builds the day-2 worker config as the installer's pointer configs are: merge
// the worker config served by the machine-config server on api-int:22623, trusting the
// cluster's root CA, taken from the bootstrap-in-place config.
func workerPointer(c *OpenShift, bootstrap []byte) ([]byte, error) {
	var cfg ignitionFiles
	if err := json.Unmarshal(bootstrap, &cfg); err != nil {
		return nil, fmt.Errorf("reading %s: %w", installerIgnition, err)
	}
	var ca []byte
	for _, f := range cfg.Storage.Files {
		if f.Path != installerRootCA || f.Contents.Source == nil {
			continue
		}
		if f.Contents.Compression != nil && *f.Contents.Compression != "" {
			return nil, fmt.Errorf("%s in %s is %s-compressed; render reads plain data URLs only", installerRootCA, installerIgnition, *f.Contents.Compression)
		}
		d, err := dataurl.DecodeString(*f.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", installerRootCA, installerIgnition, err)
		}
		ca = d.Data
	}
	if len(ca) == 0 {
		return nil, fmt.Errorf("%s has no %s: cannot build the worker config", installerIgnition, installerRootCA)
	}
	src := fmt.Sprintf("https://api-int.%s.%s:22623/config/worker", c.ClusterName, strings.TrimSuffix(c.BaseDomain, "."))
	caURL := dataurl.New(ca, "text/plain", "charset", "utf-8").String()
	ptr := map[string]any{
		"ignition": map[string]any{
			"version": "3.2.0",
			"config":  map[string]any{"merge": []any{map[string]any{"source": src}}},
			"security": map[string]any{"tls": map[string]any{
				"certificateAuthorities": []any{map[string]any{"source": caURL}},
			}},
		},
	}
	b, err := json.Marshal(ptr)
	if err != nil {
		return nil, err
	}
	if _, _, err := validateIgnition(WorkerPath, b, true); err != nil {
		return nil, err
	}
	return b, nil
}

// ignitionFiles is the file list of an Ignition config of any 3.x spec (they all spell
// storage.files alike), the part render reads of a config the installer wrote.
type ignitionFiles struct {
	Storage struct {
		Files []struct {
			Path     string `json:"path"`
			Contents struct {
				Source      *string `json:"source"`
				Compression *string `json:"compression"`
			} `json:"contents"`
		} `json:"files"`
	} `json:"storage"`
}

// clusterReport is what the install-config fixes for good that a site must match: the
// machine networks (their IP families), FIPS mode and whether it has a proxy.
func clusterReport(ic InstallConfig) *ClusterReport {
	r := &ClusterReport{FIPS: ic.FIPS, Proxy: ic.Proxy != nil}
	for _, n := range ic.Networking.MachineNetwork {
		r.MachineNetwork = append(r.MachineNetwork, n.CIDR)
	}
	return r
}
