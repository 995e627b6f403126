package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/go-semver/semver"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/vincent-petithory/dataurl"
)

// The files openshift-install create single-node-ignition-config writes into its directory.
const (
	installerIgnition = "bootstrap-in-place-for-live-iso.ign"
	installerRootCA   = "/opt/openshift/tls/root-ca.crt"
)

// The installer's credentials, as Report.Installer names them.
const (
	installerKubeconfig = "kubeconfig"
	installerPassword   = "kubeadmin-password"
)

// installerOutputs are copied from the installer's directory into the stage output (0600:
// the kubeconfig and password are cluster-admin credentials).
var installerOutputs = []struct {
	rel  string
	perm os.FileMode
}{
	{"auth/" + installerKubeconfig, 0o600},
	{"auth/" + installerPassword, 0o600},
	{"metadata.json", 0o644},
}

// ErrNoInstaller means openshift-install could not be found.
var ErrNoInstaller = errors.New("openshift-install is not available")

// extraManifest is a file render adds to the installer's openshift/ directory.
type extraManifest struct {
	name string // file name in manifests/ and openshift/
	data []byte
	info ManifestFile
}

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
	if err := writeInstallConfig(env.out, icPath, c, secrets.kept(opts.KeepSecrets), 0o644); err != nil {
		return err
	}
	rep.Manifests = append(rep.Manifests, ManifestFile{Path: icPath, Kind: "InstallConfig", Name: c.ClusterName, Redacted: !opts.KeepSecrets})
	extras, err := openshiftManifests(ctx, opts, variant, rep)
	if err != nil {
		return err
	}
	if err := writeManifests(env, extras, rep); err != nil {
		return err
	}
	ign, err := runInstaller(ctx, env, installer, c, secrets, extras, rep)
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

// runInstaller runs openshift-install in a work directory of its own, which holds the real
// pull secret and is removed on return. Extra manifests go in between: create manifests, add
// them to openshift/, then create the ignition config from the manifests on disk. It keeps
// the installer's outputs and returns the bootstrap-in-place config.
func runInstaller(ctx context.Context, env *runEnv, installer string, c *OpenShift, s installSecrets, extras []extraManifest, rep *Report) ([]byte, error) {
	version, err := installerVersion(ctx, env, installer)
	if err != nil {
		return nil, err
	}
	env.useTool("openshift-install", version)
	rep.Tools["openshift-install"] = version

	work, err := os.MkdirTemp("", "snofactory-render-installer-")
	if err != nil {
		return nil, fmt.Errorf("creating openshift-install's work directory: %w", err)
	}
	defer os.RemoveAll(work)
	if err := writeInstallConfig(work, "install-config.yaml", c, s, 0o600); err != nil {
		return nil, err
	}
	run := installerRun{env: env, path: installer, dir: work, release: c.ReleaseImage}
	if len(extras) > 0 {
		if err := run.create(ctx, "manifests"); err != nil {
			return nil, err
		}
		for _, m := range extras {
			if err := writeFile(work, "openshift/"+m.name, m.data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	if err := run.create(ctx, "single-node-ignition-config"); err != nil {
		return nil, err
	}
	return keepInstallerOutputs(env, work, rep)
}

// installerRun runs openshift-install on one work directory.
type installerRun struct {
	env     *runEnv
	path    string
	dir     string
	release string // OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE; "" for the installer's own
}

// create runs `openshift-install create ASSET --dir DIR`.
func (r installerRun) create(ctx context.Context, asset string) error {
	cmd := exec.Command(r.path, "create", asset, "--dir", r.dir)
	cmd.Env = append(os.Environ(), "OPENSHIFT_INSTALL_INVOKER=snofactory")
	if r.release != "" {
		cmd.Env = append(cmd.Env, "OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE="+r.release)
	}
	r.env.log.Info("running openshift-install", "args", "create "+asset)
	if err := r.env.exec(ctx, cmd); err != nil {
		return fmt.Errorf("openshift-install create %s: %w", asset, err)
	}
	return nil
}

// keepInstallerOutputs adds the live system's install phase units to the installer's
// bootstrap-in-place config, validates it and copies it,
// the cluster credentials and metadata.json from work into the stage output.
func keepInstallerOutputs(env *runEnv, work string, rep *Report) ([]byte, error) {
	ign, err := os.ReadFile(filepath.Join(work, installerIgnition))
	if err != nil {
		return nil, fmt.Errorf("openshift-install did not write %s: %w", installerIgnition, err)
	}
	if ign, err = withLivePhases(ign); err != nil {
		return nil, err
	}
	ignVersion, warnings, err := validateIgnition("openshift-install's "+installerIgnition, ign, false)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		env.log.Warn("openshift-install's Ignition config: "+w, "file", installerIgnition)
	}
	if err := writeFile(env.out, ConfigPath, ign, 0o600); err != nil {
		return nil, err
	}
	rep.Ignition = map[string]IgnitionFile{handoff.ConfigNode: {Path: ConfigPath, Version: ignVersion, Size: len(ign), Secret: true}}
	env.log.Info("wrote the bootstrap-in-place config (holds the pull secret; 0600)", "path", ConfigPath, "ignition", ignVersion, "bytes", len(ign))

	rep.Installer = map[string]string{}
	for _, o := range installerOutputs {
		b, err := os.ReadFile(filepath.Join(work, filepath.FromSlash(o.rel)))
		if err != nil {
			return nil, fmt.Errorf("openshift-install did not write %s: %w", o.rel, err)
		}
		if err := writeFile(env.out, o.rel, b, o.perm); err != nil {
			return nil, err
		}
		rep.Installer[filepath.Base(o.rel)] = o.rel
	}
	return ign, nil
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

// openshiftManifests builds everything render adds to the installer's openshift/ directory:
// the install phase units, the relocation MachineConfigs, the user's fragments, and the ingress placement.
func openshiftManifests(ctx context.Context, opts Options, variant string, rep *Report) ([]extraManifest, error) {
	phases, err := phasesManifest(variant)
	if err != nil {
		return nil, err
	}
	out := []extraManifest{phases}
	if r := opts.Relocation; r != nil {
		mcs, relocation, err := relocationManifests(variant, *r)
		if err != nil {
			return nil, err
		}
		out = append(out, mcs...)
		// The relocation address is the node IP at every site, so the records can point at it.
		dns, err := dnsmasqManifest(variant, opts.OpenShift.ClusterName, opts.OpenShift.BaseDomain, *r)
		if err != nil {
			return nil, err
		}
		out = append(out, dns)
		rep.Relocation = relocation
	}
	frags, results, err := fragmentManifests(ctx, opts, variant)
	if err != nil {
		return nil, err
	}
	out = append(out, frags...)
	rep.Fragments = append(rep.Fragments, results...)

	// Day-2 workers on a single-replica control plane: keep the default router on the
	// master. Upstream's installer asks for the same through the Ingress config's
	// defaultPlacement (ControlPlane on platform none with one master); the explicit
	// IngressController also pins one replica, so a new worker never attracts the router and
	// the node's address stays the only ingress address (no load balancer at the edge).
	if opts.WorkerIgnition && controlPlaneTopology(1) == "SingleReplica" {
		doc, err := marshalYAML(ingressController())
		if err != nil {
			return nil, err
		}
		file := "99-snofactory-ingresscontroller-default.yaml"
		out = append(out, extraManifest{name: file, data: doc, info: ManifestFile{Path: ManifestDir + "/" + file, Kind: "IngressController", Name: "default"}})
	}
	return out, nil
}

// machineConfigManifest is the extra manifest for a MachineConfig document.
func machineConfigManifest(what, concern string, doc []byte) (extraManifest, error) {
	name, v, err := checkMachineConfig(what, doc)
	if err != nil {
		return extraManifest{}, err
	}
	file := name + ".yaml"
	return extraManifest{name: file, data: doc, info: ManifestFile{
		Path: ManifestDir + "/" + file, Kind: "MachineConfig", Name: name, IgnitionVersion: v, Concern: concern}}, nil
}

// relocationManifests is the relocatable-seed MachineConfigs as manifests, and the settings
// they carry for render.json.
func relocationManifests(variant string, r Relocation) ([]extraManifest, *RelocationReport, error) {
	mcs, rep, err := relocationConfigs(variant, r)
	if err != nil {
		return nil, nil, err
	}
	var out []extraManifest
	for _, mc := range mcs {
		doc, err := translateOwn(mc.Config.Metadata.Name, mc.Config, false)
		if err != nil {
			return nil, nil, err
		}
		m, err := machineConfigManifest(mc.Config.Metadata.Name, mc.Concern, doc)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, m)
	}
	return out, rep, nil
}

// mergedFragments names the MachineConfig the fragments without metadata are merged into.
const mergedFragments = "99-master-snofactory-fragments"

// fragmentManifests turns the user's Butane fragments into MachineConfigs: a fragment with
// metadata is its own; the others are merged, in order, into one.
func fragmentManifests(ctx context.Context, opts Options, variant string) ([]extraManifest, []FragmentResult, error) {
	clusterSpec, err := openshiftIgnitionVersion(variant)
	if err != nil {
		return nil, nil, err
	}
	merged, err := newMerger(clusterSpec)
	if err != nil {
		return nil, nil, err
	}
	var out []extraManifest
	var results []FragmentResult
	nMerged := 0
	for i, f := range opts.Fragments {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		name, src, h, err := readOpenShiftFragment(opts, f, i, variant)
		if err != nil {
			return nil, nil, err
		}
		res := FragmentResult{Name: name, Variant: h.Variant, Version: h.Version}
		if h.Metadata != nil {
			m, err := fragmentMachineConfig(name, src)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, m)
			res.Output = m.info.Path
		} else {
			ign, err := translate(name, withPlaceholderMetadata(src), true)
			if err != nil {
				return nil, nil, err
			}
			if err := merged.add(name, ign); err != nil {
				return nil, nil, err
			}
			nMerged++
			res.Output = ManifestDir + "/" + mergedFragments + ".yaml"
		}
		results = append(results, res)
	}
	if nMerged > 0 {
		m, err := mergedMachineConfig(merged)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, m)
	}
	return out, results, nil
}

// readOpenShiftFragment reads the i-th fragment and checks that its Butane variant can
// configure the cluster's node: openshift, not newer than the cluster's.
func readOpenShiftFragment(opts Options, f Fragment, i int, variant string) (string, []byte, butaneHeader, error) {
	name, src, h, err := loadFragment(opts, f, i)
	if err != nil {
		return "", nil, h, err
	}
	if h.Variant != "openshift" {
		return "", nil, h, &ButaneError{Name: name, Err: fmt.Errorf("variant %s cannot configure an OpenShift node; use variant: openshift, version: %s", h.Variant, variant)}
	}
	if fv, err := semver.NewVersion(h.Version); err == nil && semver.New(variant).LessThan(*fv) {
		return "", nil, h, &ButaneError{Name: name, Err: fmt.Errorf("openshift %s is newer than the cluster's %s", h.Version, variant)}
	}
	return name, src, h, nil
}

// fragmentMachineConfig is a fragment with metadata: a MachineConfig of its own.
func fragmentMachineConfig(name string, src []byte) (extraManifest, error) {
	doc, err := translate(name, src, false)
	if err != nil {
		return extraManifest{}, err
	}
	return machineConfigManifest(name, "", doc)
}

// mergedMachineConfig wraps the merged fragments into their MachineConfig.
func mergedMachineConfig(merged *ignitionMerger) (extraManifest, error) {
	ign, err := merged.bytes(mergedFragments)
	if err != nil {
		return extraManifest{}, err
	}
	doc, err := wrapMachineConfig(mergedFragments, ign)
	if err != nil {
		return extraManifest{}, err
	}
	return machineConfigManifest(mergedFragments, "", doc)
}

// openshiftIgnitionVersion is the Ignition spec the Butane openshift variant emits.
func openshiftIgnitionVersion(variant string) (string, error) {
	probe := fmt.Sprintf("variant: openshift\nversion: %s\nmetadata: {name: probe, labels: {%s: master}}\n", variant, roleLabel)
	ign, err := translate("openshift "+variant+" probe", []byte(probe), true)
	if err != nil {
		return "", err
	}
	return configVersion(ign)
}

// controlPlaneTopology mirrors the installer: one control-plane replica is SingleReplica.
func controlPlaneTopology(replicas int) string {
	if replicas == 1 {
		return "SingleReplica"
	}
	return "HighlyAvailable"
}

// IngressController is the operator.openshift.io/v1 object, reduced to node placement.
type IngressController struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas      int `yaml:"replicas"`
		NodePlacement struct {
			NodeSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"nodeSelector"`
		} `yaml:"nodePlacement"`
	} `yaml:"spec"`
}

func ingressController() IngressController {
	var ic IngressController
	ic.APIVersion = "operator.openshift.io/v1"
	ic.Kind = "IngressController"
	ic.Metadata.Name = "default"
	ic.Metadata.Namespace = "openshift-ingress-operator"
	ic.Spec.Replicas = 1
	ic.Spec.NodePlacement.NodeSelector.MatchLabels = map[string]string{"node-role.kubernetes.io/master": ""}
	return ic
}

// findInstaller locates openshift-install: the resolve stage's output, a given path, PATH.
func findInstaller(opts Options, env *runEnv) (string, error) {
	var p, from string
	switch {
	case env.resolved != nil:
		in := env.resolved
		if in.Out.Installer == "" {
			return "", fmt.Errorf("%w: the %s stage extracted none from the release (its lock pins no installer image)", ErrNoInstaller, in.Stage)
		}
		p, from = in.Path(in.Out.Installer), "the "+in.Stage+" stage's output"
	case opts.InstallerPath != "":
		p, from = opts.InstallerPath, "the configured installer path"
	default:
		lp, err := exec.LookPath("openshift-install")
		if err != nil {
			return "", fmt.Errorf("%w: it is not on PATH. Put the openshift-install of release %s on PATH "+
				"(e.g. `oc adm release extract --command=openshift-install --to DIR RELEASE_IMAGE`), "+
				"or let the resolve stage extract it from the release", ErrNoInstaller, opts.OpenShift.Version)
		}
		return lp, nil
	}
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		if err == nil {
			err = fs.ErrPermission
		}
		return "", fmt.Errorf("%w: %s from %s is not an executable file (%v)", ErrNoInstaller, p, from, err)
	}
	return p, nil
}

// installerVersion returns the first line of `openshift-install version`.
func installerVersion(ctx context.Context, env *runEnv, installer string) (string, error) {
	var out strings.Builder
	cmd := exec.Command(installer, "version")
	cmd.Stdout = &out
	if err := env.exec(ctx, cmd); err != nil {
		return "", fmt.Errorf("openshift-install version: %w", err)
	}
	v := firstLine(out.String())
	if !strings.HasPrefix(v, "openshift-install ") {
		return "", fmt.Errorf("openshift-install version printed %q, not a version", v)
	}
	return strings.TrimPrefix(v, "openshift-install "), nil
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
