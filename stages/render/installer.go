package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/snofactory/snofactory/stages/internal/handoff"
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

// installerLabel keys the openshift-install binary's content when its path is given.
const installerLabel = "tools/openshift-install"

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
	if !strings.ContainsRune(p, filepath.Separator) {
		// A bare name would be looked up on PATH by exec, not found beside us.
		p = "." + string(filepath.Separator) + p
	}
	return p, nil
}

// installerInfo is what `openshift-install version` prints (installer
// cmd/openshift-install/version.go runVersionCmd): "<os.Args[0]> <version>", then
// "built from commit C" when the build recorded one and "release image R"; a later
// installer adds "release architecture A" and, when A is multi or unknown, "default
// architecture D" (runVersionCmd at de45fedd; at 1679af70 the first three only).
type installerInfo struct {
	version string // pkg/version Version(): the release name oc injected, else the build's tag
	commit  string
	release string // pkg/asset/releaseimage Default(): the injected pull spec, else the CI default
}

// parseInstallerVersion reads `openshift-install version` run as argv0. The first line starts
// with the path the installer was run by (absolute, relative, with spaces: whatever argv[0]
// was), so the version is what follows argv0, or the last word when a wrapper ran it under
// another name. A version with spaces is pkg/version's "was not built correctly".
func parseInstallerVersion(out, argv0 string) (installerInfo, error) {
	var info installerInfo
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	first := strings.TrimRight(lines[0], "\r")
	v, ok := strings.CutPrefix(first, argv0+" ")
	if !ok {
		v = first[strings.LastIndexByte(first, ' ')+1:]
	}
	if v == "" || v == first || strings.ContainsAny(v, " \t") {
		return info, fmt.Errorf("`%s version` printed %q: expected the program path and a version "+
			"(a release's openshift-install, e.g. from `oc adm release extract --command=openshift-install`)", argv0, first)
	}
	info.version = v
	for _, l := range lines[1:] {
		l = strings.TrimRight(l, "\r")
		if c, ok := strings.CutPrefix(l, "built from commit "); ok {
			info.commit = c
		} else if r, ok := strings.CutPrefix(l, "release image "); ok {
			info.release = r
		}
	}
	return info, nil
}

// installerVersion runs `openshift-install version` and parses what it prints.
func installerVersion(ctx context.Context, env *runEnv, installer string) (installerInfo, error) {
	var out strings.Builder
	cmd := exec.Command(installer, "version")
	cmd.Stdout = &out
	if err := env.exec(ctx, cmd); err != nil {
		return installerInfo{}, fmt.Errorf("openshift-install version: %w", err)
	}
	return parseInstallerVersion(out.String(), installer)
}

// checkInstallerRelease refuses an installer extracted for another release than the one the
// installer is told to install. Only `oc adm release extract` injects a release (by digest)
// into the binary; the one resolve takes from the installer image prints the CI default
// (registry.ci.openshift.org/origin/release:x.y), which says nothing, so it is not checked.
// Digests, not pull specs, are compared: a mirror serves the same release under another name.
func checkInstallerRelease(installer string, info installerInfo, pinned string) error {
	_, _, own := splitRef(info.release)
	_, _, want := splitRef(pinned)
	if own == "" || want == "" || own == want {
		return nil
	}
	return fmt.Errorf("%s is the openshift-install of release %s, but this build installs %s: "+
		"use the installer of that release (`oc adm release extract --command=openshift-install %s`)",
		installer, info.release, pinned, pinned)
}

// runInstaller runs openshift-install in a work directory of its own, which holds the real
// pull secret and is removed on return. Extra manifests go in between: create manifests, add
// them to openshift/, then create the ignition config from the manifests on disk. It keeps
// the installer's outputs and returns the bootstrap-in-place config with the live system's
// units (live is the relocation address the live system adds; invalid for none).
func runInstaller(ctx context.Context, env *runEnv, installer string, c *OpenShift, s installSecrets, extras []extraManifest, live netip.Prefix, rep *Report) ([]byte, error) {
	info, err := installerVersion(ctx, env, installer)
	if err != nil {
		return nil, err
	}
	if err := checkInstallerRelease(installer, info, c.ReleaseImage); err != nil {
		return nil, err
	}
	env.useTool("openshift-install", info.version)
	rep.Tools["openshift-install"] = info.version

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
	return keepInstallerOutputs(env, work, live, rep)
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

// keepInstallerOutputs adds the live system's units (withLivePhases) to the installer's
// bootstrap-in-place config, validates the result and writes it once, then copies the
// cluster credentials and metadata.json from work into the stage output. The config is
// complete before it is written: a refused addition leaves no config.ign without it.
func keepInstallerOutputs(env *runEnv, work string, live netip.Prefix, rep *Report) ([]byte, error) {
	ign, err := os.ReadFile(filepath.Join(work, installerIgnition))
	if err != nil {
		return nil, fmt.Errorf("openshift-install did not write %s: %w", installerIgnition, err)
	}
	if ign, err = withLivePhases(ign, live); err != nil {
		return nil, err
	}
	ignVersion, warnings, err := validateIgnition("openshift-install's "+installerIgnition+" with the live system's units", ign, false)
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
	if live.IsValid() {
		env.log.Info("the live system adds the relocation address before bootkube", "unit", LiveAddressUnit, "address", live.String())
	}

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
