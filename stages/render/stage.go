package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// stageVersion changes whenever render's outputs change for the same Options.
const stageVersion = "5"

// Secret names render reads.
const (
	SecretPullSecret = "pullSecret"
	SecretSSHKey     = "sshKey"
)

// BootstrapConfigLife is how long an OpenShift render may be reused: the installer's
// bootstrap certificates last 24 h, less a margin for the install that uses them.
const BootstrapConfigLife = 20 * time.Hour

// New returns the render stage for opts.
func New(opts Options) pipeline.Stage {
	s := pipeline.Stage{
		Name:    Name,
		Version: stageVersion,
		Options: opts,
		Files:   map[string]string{},
	}
	for _, f := range opts.Fragments {
		if f.File != "" {
			s.Files[f.File] = opts.HostFiles[f.File]
		}
	}
	for _, k := range opts.SiteKeys {
		s.Files[k] = opts.HostFiles[k]
	}
	if opts.Target == oskind.OpenShift {
		// The bootstrap-in-place config carries the installer's 24 h certificates (kubelet
		// signer, localhost serving cert): it must be used within a day of rendering. The
		// margin leaves time for the live ISO, the install and its retries.
		s.MaxAge = BootstrapConfigLife
		s.Secrets = append(s.Secrets, SecretPullSecret)
		if opts.FromResolve {
			s.Deps = handoff.Deps(handoff.Resolve{})
		} else if opts.InstallerPath != "" {
			s.Files[installerLabel] = opts.InstallerPath
		}
	}
	if opts.SSHKey {
		s.Secrets = append(s.Secrets, SecretSSHKey)
	}
	s.Run = func(ctx context.Context, env *pipeline.Env) error {
		renv := &runEnv{
			out:     env.Out,
			secrets: env.Secrets,
			log:     env.Log,
			exec:    env.Exec,
			useTool: env.UseTool,
		}
		if opts.FromResolve && opts.Target == oskind.OpenShift {
			in, err := handoff.Read[handoff.Resolve](env)
			if err != nil {
				return err
			}
			renv.resolved = &in
		}
		rep, err := run(ctx, opts, renv)
		if err != nil {
			return err
		}
		return handoff.Write(env, record(rep))
	}
	return s
}

// Render does the stage's work without the engine (for `snofactory render FILE -o DIR`):
// outputs go straight to outDir. There is no resolve output here (FromResolve is ignored):
// openshift-install comes from InstallerPath or PATH.
func Render(ctx context.Context, opts Options, secrets pipeline.SecretSource, outDir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("creating output directory: %w", err)
	}
	if err := removePrevious(outDir); err != nil {
		return err
	}
	_, err := run(ctx, opts, &runEnv{
		out:     outDir,
		secrets: secrets,
		log:     log,
		exec: func(ctx context.Context, cmd *exec.Cmd) error {
			// As the engine's Env.Exec: the tool's output becomes debug lines, the last one
			// (often the error) flushed even without a newline.
			w := pipeline.NewLineLogger(log, cmd.Path)
			defer w.Flush()
			return pipeline.RunTool(ctx, cmd, w)
		},
		useTool: func(string, string) {},
	})
	return err
}

// runEnv is what run needs from its caller, engine or not.
type runEnv struct {
	out string
	// resolved is the resolve stage's output (nil outside the engine, or without FromResolve).
	resolved *handoff.Input[handoff.Resolve]
	secrets  pipeline.SecretSource
	log      *slog.Logger
	exec     func(context.Context, *exec.Cmd) error
	useTool  func(name, version string)
}

func run(ctx context.Context, opts Options, env *runEnv) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("render options: %w", err)
	}
	rep := &Report{Target: opts.Target, StageVersion: stageVersion, Tools: libraryVersions()}
	for lib, v := range rep.Tools {
		env.useTool(lib, v)
	}
	var err error
	switch opts.Target {
	case oskind.CoreOS:
		err = renderCoreOS(ctx, opts, env, rep)
	case oskind.OpenShift:
		err = renderOpenShift(ctx, opts, env, rep)
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(rep.Manifests, func(i, j int) bool { return rep.Manifests[i].Path < rep.Manifests[j].Path })
	b, err := stableJSON(rep)
	if err != nil {
		return nil, fmt.Errorf("encoding render.json: %w", err)
	}
	return rep, writeFile(env.out, "render.json", b, 0o644)
}

// record is the stage's output record: the configs, and the installer's credentials for the
// stages that reach the cluster.
func record(rep *Report) handoff.Render {
	rec := handoff.Render{Target: rep.Target, Configs: map[string]handoff.IgnitionConfig{}}
	for role, f := range rep.Ignition {
		rec.Configs[role] = handoff.IgnitionConfig{Path: handoff.File(f.Path), Version: f.Version, Secret: f.Secret}
	}
	rec.Kubeconfig = handoff.File(rep.Installer[installerKubeconfig])
	rec.KubeadminPassword = handoff.File(rep.Installer[installerPassword])
	if rep.Relocation != nil {
		rec.RelocationMachineConfigs = rep.Relocation.MachineConfigs
	}
	if rep.Cluster != nil {
		rec.MachineNetwork, rec.FIPS, rec.Proxy = rep.Cluster.MachineNetwork, rep.Cluster.FIPS, rep.Cluster.Proxy
	}
	if rep.ContainerStorage != nil {
		rec.ContainerStorageLabel = rep.ContainerStorage.Label
	}
	return rec
}

// libraryVersions reports the Butane and Ignition modules compiled in.
func libraryVersions() map[string]string {
	return map[string]string{
		"butane":   versions.Module("github.com/coreos/butane"),
		"ignition": versions.Module("github.com/coreos/ignition/v2"),
	}
}

// removePrevious deletes what an earlier render into dir produced, as its render.json lists
// it, so a re-render into the same directory leaves exactly the new outputs. Nothing else in
// dir is touched.
func removePrevious(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "render.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var old Report
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("%s holds a render.json that is not render's: %w", dir, err)
	}
	paths := []string{"render.json"}
	for _, f := range old.Ignition {
		paths = append(paths, f.Path)
	}
	for _, m := range old.Manifests {
		paths = append(paths, m.Path)
	}
	for _, p := range old.Installer {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if !filepath.IsLocal(filepath.FromSlash(p)) {
			return fmt.Errorf("%s/render.json lists %q, outside the directory; not removing it", dir, p)
		}
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the previous render's %s: %w", p, err)
		}
	}
	return nil
}
