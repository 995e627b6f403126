package stages

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/stages/render"
	"github.com/snofactory/snofactory/stages/resolve"
)

// Options are build-time choices that are not part of the blueprint.
type Options struct {
	// LockFile, when set, makes the build refuse to run if anything resolves differently
	// from this lock (build --locked).
	LockFile string
}

// arch is the node architecture, in CoreOS naming. Seeds are x86_64 for now.
const arch = "x86_64"

// Secrets are the secrets a blueprint's stages may read, by the names the stages use
// (render.SecretPullSecret, render.SecretSSHKey).
func Secrets(bp *blueprints.Blueprint) pipeline.SecretSource {
	secrets := secretSet{}
	if osh := bp.Spec.OpenShift; osh != nil {
		secrets.files = pipeline.SecretFiles{render.SecretPullSecret: bp.Resolved.PullSecretFile}
		if bp.Resolved.SSHPublicKeyFile != "" {
			secrets.files[render.SecretSSHKey] = bp.Resolved.SSHPublicKeyFile
		} else if osh.SSHPublicKey != "" {
			secrets.inline = map[string][]byte{render.SecretSSHKey: []byte(osh.SSHPublicKey)}
		}
	}
	return secrets
}

// Graph maps a loaded blueprint onto the stage graph and the secrets its stages may read.
func Graph(bp *blueprints.Blueprint, opts Options) (*pipeline.Graph, pipeline.SecretSource, error) {
	secrets := Secrets(bp)
	ropts, err := RenderOptions(bp)
	if err != nil {
		return nil, nil, err
	}
	reg := RegistryConfig(bp)
	reg.PolicyFile = bp.Resolved.SignaturePolicyFile // precache enforces it on every image

	g := &pipeline.Graph{Blueprint: bp.Metadata.Name}
	g.Stages = append(g.Stages,
		resolveStage(ResolveOptions(bp, opts), bp.CheckISO()),
		render.New(ropts),
		liveISOStage(bp),
		precache.New(precache.Options{Registry: reg, Arch: arch}),
		pending("install", []string{liveiso.Name, precache.Name}, "installs the node in the factory VM"),
		pending("validate", []string{"install"}, "checks the installed node before it ships"),
		pending("seal", []string{"validate"}, "prepares the node for relocation and writes the seed disk"),
		pending("publish", []string{"seal"}, "pushes the seed as an OCI artifact"),
	)
	if err := g.Validate(); err != nil {
		return nil, nil, fmt.Errorf("wiring blueprint %s: %w", bp.Metadata.Name, err)
	}
	return g, secrets, nil
}

// RegistryConfig is how resolve and precache reach registries for this blueprint.
// Registries on loopback addresses are reached over plain HTTP, as Docker does by default
// for 127.0.0.0/8: a depot-local or test registry rarely has a certificate.
func RegistryConfig(bp *blueprints.Blueprint) registries.Config {
	s := bp.Spec
	var c registries.Config
	refs := append([]string{}, s.ExtraImages...)
	if osh := s.OpenShift; osh != nil {
		c.PullSecret = render.SecretPullSecret
		refs = append(refs, osh.ReleaseImage)
		for _, op := range osh.Operators {
			refs = append(refs, op.Bundle, op.Catalog)
		}
	}
	for _, m := range s.RegistryMirrors {
		c.Mirrors = append(c.Mirrors, registries.Mirror{Source: m.Source, Mirrors: m.Mirrors})
		refs = append(refs, m.Source)
		refs = append(refs, m.Mirrors...)
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		host := registryHost(ref)
		if host != "" && isLoopback(host) && !seen[host] {
			seen[host] = true
			c.Insecure = append(c.Insecure, host)
		}
	}
	slices.Sort(c.Insecure)
	return c
}

func registryHost(ref string) string {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || rest == "" || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return ""
	}
	return host
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// ResolveOptions maps the blueprint onto the resolve stage's options.
func ResolveOptions(bp *blueprints.Blueprint, opts Options) resolve.Options {
	s := bp.Spec
	o := resolve.Options{Arch: arch, Images: s.ExtraImages, Registry: RegistryConfig(bp), Locked: opts.LockFile}
	// Resolve opens the release and runs nothing unchecked: render executes the installer
	// it extracts, so the signature policy applies here as well as in precache.
	o.Registry.PolicyFile = bp.Resolved.SignaturePolicyFile
	if osh := s.OpenShift; osh != nil {
		o.Release = osh.ReleaseImage
		for _, op := range osh.Operators {
			if op.Bundle != "" {
				o.Operators = append(o.Operators, op.Bundle)
			} else {
				o.Catalogs = append(o.Catalogs, resolve.CatalogOperator{Package: op.Name, Channel: op.Channel, Catalog: op.Catalog})
			}
		}
	}
	if src := s.Source; src != nil {
		if src.URL != "" {
			o.ISO = &resolve.ISOSource{URL: src.URL, SHA256: src.SHA256}
		} else {
			o.ISOPath, o.ISOLabel = bp.Resolved.ISO, src.Path
		}
	}
	return o
}

// resolveStage fails, when it runs, if the blueprint's live ISO has not been built yet,
// naming the command that builds it; a plan still shows the whole graph.
func resolveStage(o resolve.Options, isoErr error) pipeline.Stage {
	if isoErr == nil {
		return resolve.New(o)
	}
	o.ISOPath = ""
	s := resolve.New(o)
	s.Run = func(context.Context, *pipeline.Env) error { return isoErr }
	return s
}

// liveISOStage embeds render's config into the blueprint's ISO (a local file or a URL) or,
// for OpenShift without a source, the release's RHCOS ISO pinned by resolve.
func liveISOStage(bp *blueprints.Blueprint) pipeline.Stage {
	l := bp.Spec.LiveISO
	o := liveiso.StageOptions{KargsAppend: l.KernelArguments.Append, KargsDelete: l.KernelArguments.Delete}
	for i, f := range l.NetworkKeyfiles {
		if o.NetworkKeyfiles == nil {
			o.NetworkKeyfiles = map[string]string{}
		}
		o.NetworkKeyfiles[filepath.Base(f)] = bp.Resolved.NetworkKeyfiles[i]
	}
	switch src := bp.Spec.Source; {
	case src != nil && src.URL != "":
		o.ISOURL, o.ISOSHA256 = src.URL, src.SHA256
	case src != nil:
		if err := bp.CheckISO(); err != nil {
			s := liveiso.New(o)
			s.Run = func(context.Context, *pipeline.Env) error { return err }
			return s
		}
		o.ISOPath = bp.Resolved.ISO
	default:
		o.ISOLockFrom = resolve.Name
	}
	return liveiso.New(o)
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
	// A tag that starts with the version names it; otherwise (a release pinned by digest)
	// render takes it from the release resolve locked.
	version, _ := releaseVersion(osh.ReleaseImage)
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
		c.ClusterNetwork = append(c.ClusterNetwork, render.ClusterNetwork{CIDR: n.CIDR, HostPrefix: n.HostPrefix})
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
// It fails for digest references and tags that do not start with a version.
func releaseVersion(ref string) (string, error) {
	if m := releaseTag.FindStringSubmatch(ref); m != nil && !strings.Contains(ref, "@") {
		return m[1], nil
	}
	return "", fmt.Errorf("openshift.releaseImage %s: cannot tell the OpenShift version from the reference; use a tag that starts with it (e.g. :4.16.12-x86_64)", ref)
}

// secretSet serves secrets from files named in the blueprint or from inline values.
type secretSet struct {
	files  pipeline.SecretFiles
	inline map[string][]byte
}

// Secret implements pipeline.SecretSource.
func (s secretSet) Secret(name string) ([]byte, error) {
	if v, ok := s.inline[name]; ok {
		return v, nil
	}
	if _, ok := s.files[name]; ok {
		return s.files.Secret(name)
	}
	return nil, fmt.Errorf("secret %s is not configured in the blueprint", name)
}

// Lock resolves everything the blueprint reads to digests, as the resolve stage does but
// without the cache, for `snofactory lock`. It pins the installer and a release's live ISO by
// their images' digests without extracting them (a gigabyte for the ISO); a build's resolve
// adds their checksums, and --locked accepts both forms.
func Lock(ctx context.Context, bp *blueprints.Blueprint, log *slog.Logger) (*resolve.Lock, error) {
	if err := bp.CheckISO(); err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "snofactory-lock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	return resolve.Resolve(ctx, ResolveOptions(bp, Options{}), resolve.Runtime{Secrets: Secrets(bp), Scratch: scratch, Log: log})
}
