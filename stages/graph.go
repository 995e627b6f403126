package stages

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/render"
)

// Order is the pipeline's stage order; a build's --until and --force name these.
var Order = []string{"resolve", render.Name, "live-iso", "precache", "install", "validate", "seal", "publish"}

// Secret names used by stages.
const (
	SecretPullSecret = "pullSecret"
	SecretSSHKey     = "sshKey"
)

// Graph maps a loaded blueprint onto the stage graph and the secrets its stages may read.
func Graph(bp *blueprints.Blueprint) (*pipeline.Graph, pipeline.SecretSource, error) {
	secrets := secretSet{}
	if os := bp.Spec.OpenShift; os != nil {
		secrets.files = map[string]string{SecretPullSecret: bp.Resolved.PullSecretFile}
		if bp.Resolved.SSHPublicKeyFile != "" {
			secrets.files[SecretSSHKey] = bp.Resolved.SSHPublicKeyFile
		} else if os.SSHPublicKey != "" {
			secrets.inline = map[string][]byte{SecretSSHKey: []byte(os.SSHPublicKey)}
		}
	}
	ropts, err := RenderOptions(bp)
	if err != nil {
		return nil, nil, err
	}
	renderStage := render.New(ropts)

	g := &pipeline.Graph{Blueprint: bp.Metadata.Name}
	g.Stages = append(g.Stages,
		pending("resolve", nil, "pins the release, its images and the live ISO"),
		renderStage,
		pending("live-iso", []string{render.Name}, "embeds the rendered config into the live ISO"),
		pending("precache", []string{"resolve"}, "copies every pinned image into the depot's store"),
		pending("install", []string{"live-iso", "precache"}, "installs the node in the factory VM"),
		pending("validate", []string{"install"}, "checks the installed node before it ships"),
		pending("seal", []string{"validate"}, "prepares the node for relocation and writes the seed disk"),
		pending("publish", []string{"seal"}, "pushes the seed as an OCI artifact"),
	)
	if err := g.Validate(); err != nil {
		return nil, nil, fmt.Errorf("wiring blueprint %s: %w", bp.Metadata.Name, err)
	}
	return g, secrets, nil
}

// pending is a stage this version of snofactory does not have yet. It is in the graph so plan
// shows the whole pipeline, and fails plainly if a build reaches it.
func pending(name string, deps []string, what string) pipeline.Stage {
	return pipeline.Stage{
		Name: name, Version: "pending", Deps: deps, Options: map[string]string{"pending": what},
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return fmt.Errorf("the %s stage (%s) is not implemented yet in this version of snofactory; build with --until to stop before it", name, what)
		},
	}
}

// RenderOptions maps the blueprint onto the render stage's options.
func RenderOptions(bp *blueprints.Blueprint) (render.Options, error) {
	s := bp.Spec
	o := render.Options{Target: s.Target.Type, IgnitionVersion: s.Target.IgnitionVersion, HostFiles: map[string]string{}}
	for i, f := range s.Butane {
		if f.File != "" {
			label := filepath.ToSlash(f.File)
			o.Fragments = append(o.Fragments, render.Fragment{File: label})
			o.HostFiles[label] = bp.Resolved.Butane[i]
		} else {
			o.Fragments = append(o.Fragments, render.Fragment{Inline: f.Inline})
		}
	}
	if s.Target.Type != blueprints.TargetOpenShift || s.OpenShift == nil {
		return o, nil
	}
	osh := s.OpenShift
	version, err := releaseVersion(osh.ReleaseImage)
	if err != nil {
		return o, err
	}
	c := &render.OpenShift{
		Version:          version,
		ClusterName:      osh.ClusterName,
		BaseDomain:       osh.BaseDomain,
		InstallationDisk: osh.InstallDisk,
		ServiceNetwork:   osh.ServiceNetwork,
		ReleaseImage:     osh.ReleaseImage,
	}
	for _, n := range osh.MachineNetwork {
		c.MachineNetwork = append(c.MachineNetwork, n.CIDR)
	}
	for _, n := range osh.ClusterNetwork {
		c.ClusterNetwork = append(c.ClusterNetwork, n.CIDR)
		c.HostPrefix = n.HostPrefix
	}
	for _, m := range s.RegistryMirrors {
		c.Mirrors = append(c.Mirrors, render.Mirror{Source: m.Source, Mirrors: m.Mirrors})
	}
	o.OpenShift = c
	o.Relocation = &render.Relocation{InternalIP: s.Relocation.NodeIP, ShipmentWindow: s.Relocation.KubeletCertValidity.String()}
	o.WorkerIgnition = osh.WorkerIgnition
	o.SSHKey = osh.SSHPublicKey != "" || osh.SSHPublicKeyFile != ""
	o.InstallerFrom = "resolve/bin/openshift-install"
	return o, nil
}

var releaseTag = regexp.MustCompile(`:(\d+\.\d+(?:\.\d+)?)(?:[-_.].*)?$`)

// releaseVersion reads x.y[.z] from a release image tag such as ocp-release:4.16.12-x86_64.
func releaseVersion(ref string) (string, error) {
	if m := releaseTag.FindStringSubmatch(ref); m != nil && !strings.Contains(ref, "@") {
		return m[1], nil
	}
	return "", fmt.Errorf("openshift.releaseImage %s: cannot tell the OpenShift version from the reference; use a tag that starts with it (e.g. :4.16.12-x86_64)", ref)
}

// secretSet serves secrets from files named in the blueprint or from inline values.
type secretSet struct {
	files  map[string]string
	inline map[string][]byte
}

// Secret implements pipeline.SecretSource.
func (s secretSet) Secret(name string) ([]byte, error) {
	if v, ok := s.inline[name]; ok {
		return v, nil
	}
	if p, ok := s.files[name]; ok {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading secret %s: %w", name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("secret %s is not configured in the blueprint", name)
}
