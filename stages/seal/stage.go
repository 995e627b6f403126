package seal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/pipeline/versions"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/stages/internal/handoff"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/vm"
)

// Name is the stage name.
const Name = handoff.StageSeal

// version 2: the seed carries its SBOM; 3: its record of what a site must match.
const version = "3"

// SeedDir is the seed directory inside the stage's output.
const SeedDir = "seed"

// SecretSiteIdentity is the secret the seal places on the node when Options.SiteIdentity
// is set: the age identity that opens the sealed secrets of the seed's site media. The
// seal, not the install config, carries it, so that no install cache entry and no
// OpenShift manifest holds it.
const SecretSiteIdentity = "siteIdentity"

// Options is exactly what the stage reads.
type Options struct {
	// Name is the blueprint's metadata.name; BlueprintDigest the digest of its file.
	Name            string `json:"name"`
	BlueprintDigest string `json:"blueprintDigest"`
	// Formats are the seed's disk formats (seed.FormatQCOW2, seed.FormatRaw).
	Formats []string `json:"formats"`
	// KeepPullSecret leaves the build-time pull secret on the seed's disk.
	KeepPullSecret bool `json:"keepPullSecret,omitempty"`
	// Recipients are the age (or SSH) public keys the OpenShift credentials are encrypted
	// to; none ships no credentials.
	Recipients []string `json:"recipients,omitempty"`
	// SiteIdentity says the SecretSiteIdentity secret is configured.
	SiteIdentity bool `json:"siteIdentity,omitempty"`
	// SiteConfigTimeout is how long the seed waits for its site-config medium at the site.
	SiteConfigTimeout time.Duration `json:"siteConfigTimeout,omitempty"`
	// RecertImage is the blueprint's recert image (openshift): the seal looks up its pinned
	// reference in the lock and leaves it, with the release's etcd, for the hook.
	RecertImage string `json:"recertImage,omitempty"`
	// RelocationFiles must be on an OpenShift node before it is sealed (render's).
	RelocationFiles []string `json:"relocationFiles,omitempty"`
	// ReconfigurationAPIVersion is the site-config apiVersion the seed's hook reads.
	ReconfigurationAPIVersion string `json:"reconfigurationAPIVersion"`
	// SourceDateEpoch is SOURCE_DATE_EPOCH as the build saw it ("" when not set): the
	// time the seal clamps file times to and the seed's creation time, so it keys the
	// seal (and its recipe).
	SourceDateEpoch string `json:"sourceDateEpoch,omitempty"`
	CPUs            int    `json:"cpus"`
	MemoryMiB       int    `json:"memoryMiB"`
	// How the VM runs, not what the seed is.
	Accelerator string        `json:"-"`
	BootTimeout time.Duration `json:"-"`
	// ClusterTimeout bounds an OpenShift node's waits for its cluster (the API, the MCO's
	// rollout of the placeholder pull secret) on top of the boot.
	ClusterTimeout time.Duration `json:"-"`
	Prober         vm.Prober     `json:"-"`
	// Clock gives the creation time when SOURCE_DATE_EPOCH is not set; nil means the wall
	// clock.
	Clock clock.Clock `json:"-"`
}

// New returns the seal stage.
func New(opts Options) pipeline.Stage {
	var secrets []string
	if opts.SiteIdentity {
		secrets = []string{SecretSiteIdentity}
	}
	return pipeline.Stage{
		Secrets: secrets,
		Name:    Name,
		Version: version,
		Options: opts,
		Deps:    handoff.Deps(handoff.Resolve{}, handoff.Render{}, handoff.Precache{}, handoff.Install{}, handoff.Validate{}),
		// One factory VM of the blueprint's size, while it runs: the one install or
		// validate handed on, when they ran in this build, else its own.
		Resources: pipeline.Resources{VMs: 1, CPUs: max(opts.CPUs, 1), MemoryMiB: opts.MemoryMiB},
		Session:   vm.SessionKind,
		Run: func(ctx context.Context, env *pipeline.Env) error {
			return run(ctx, opts, env)
		},
	}
}

// inputs are the upstream records the seal reads.
type inputs struct {
	resolve  handoff.Input[handoff.Resolve]
	render   handoff.Input[handoff.Render]
	precache handoff.Input[handoff.Precache]
	install  handoff.Input[handoff.Install]
	validate handoff.Input[handoff.Validate]
}

func readInputs(env *pipeline.Env) (in inputs, err error) {
	if in.resolve, err = handoff.Read[handoff.Resolve](env); err != nil {
		return in, err
	}
	if in.render, err = handoff.Read[handoff.Render](env); err != nil {
		return in, err
	}
	if in.precache, err = handoff.Read[handoff.Precache](env); err != nil {
		return in, err
	}
	if in.install, err = handoff.Read[handoff.Install](env); err != nil {
		return in, err
	}
	in.validate, err = handoff.Read[handoff.Validate](env)
	return in, err
}

func run(ctx context.Context, opts Options, env *pipeline.Env) error {
	in, err := readInputs(env)
	if err != nil {
		return err
	}
	req, err := sealRequest(opts, in)
	if err != nil {
		return err
	}
	if opts.SiteIdentity {
		if req.SiteIdentity, err = siteIdentity(env.Secrets); err != nil {
			return err
		}
	}
	work, err := seal(ctx, opts, in, req, env)
	if err != nil {
		return err
	}
	m, err := writeSeed(ctx, opts, in, work, filepath.Join(env.Out, SeedDir), env)
	if err != nil {
		return err
	}
	if err := env.Summarize(map[string]any{"disks": m.Disks, "created": m.Created}); err != nil {
		return err
	}
	return handoff.Write(env, handoff.Seal{Dir: SeedDir, Manifest: handoff.File(filepath.Join(SeedDir, seed.ManifestFile))})
}

// writeSeed turns the sealed disk work into the seed directory dir: the disk in each
// format, the credentials bundle, the SBOM, and last the manifest that describes them.
func writeSeed(ctx context.Context, opts Options, in inputs, work, dir string, env *pipeline.Env) (*seed.Manifest, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m, err := manifest(ctx, opts, in)
	if err != nil {
		return nil, err
	}
	if m.Disks, err = writeDisks(ctx, work, dir, opts.Formats, env); err != nil {
		return nil, err
	}
	if m.Credentials, err = writeCredentials(ctx, in, dir, opts.Recipients, env); err != nil {
		return nil, err
	}
	if m.Tools["qemu-img"], err = qemuImgVersion(ctx); err != nil {
		return nil, err
	}
	if m.SBOM, err = writeSBOM(ctx, in, m, dir); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("the seed manifest: %w", err)
	}
	if err := seed.WriteManifest(dir, m); err != nil {
		return nil, err
	}
	return m, nil
}

// manifest is the seed manifest without its files: where the seed came from.
func manifest(ctx context.Context, opts Options, in inputs) (*seed.Manifest, error) {
	lockPath := in.resolve.Path(in.resolve.Out.Lock)
	lock, err := lockfile.ReadLock(lockPath)
	if err != nil {
		return nil, err
	}
	_, lockDigest, err := seed.FileDigest(ctx, lockPath)
	if err != nil {
		return nil, err
	}
	created, err := seed.SourceDateFrom(opts.SourceDateEpoch, clock.Or(opts.Clock).Now)
	if err != nil {
		return nil, err
	}
	m := &seed.Manifest{
		SchemaVersion:             seed.SchemaVersion,
		Name:                      opts.Name,
		Target:                    in.install.Out.Target,
		ReleaseVersion:            lock.Release.Version,
		Firmware:                  in.install.Out.Firmware,
		BlueprintDigest:           digest.Digest(opts.BlueprintDigest),
		LockDigest:                lockDigest,
		ReconfigurationAPIVersion: opts.ReconfigurationAPIVersion,
		Created:                   created,
		Tools:                     map[string]string{"snofactory": versions.Self()},
		Images:                    []seed.Image{},
		Validation: seed.Validation{Passed: in.validate.Out.Passed, Skipped: in.validate.Out.Skipped,
			Warnings: in.validate.Out.Warnings},
	}
	for _, im := range in.precache.Out.Images {
		m.Images = append(m.Images, seed.Image{Name: im.Name, Ref: im.Ref, Digest: digest.Digest(im.Digest)})
	}
	m.SiteFit, err = siteFit(in.render.Out, in.install.Out, lock.Release)
	return m, err
}

// siteFit is what a site must match, from what render put in the install-config and the
// release resolve locked: what lifecycle-agent's seed cluster info records for its checks
// (lca-cli/seedclusterinfo/seedclusterinfo.go SeedClusterInfo). The proxy is recorded for
// an OpenShift seed only: the conformance OS has no cluster-wide proxy to compare. The
// container-storage label is the separate /var/lib/containers partition's, if the
// blueprint asked for one (container_storage_mountpoint_target): render's MachineConfig
// makes it on OpenShift, the conformance installer on the conformance OS.
func siteFit(r handoff.Render, inst handoff.Install, release lockfile.LockedRelease) (*seedfit.Record, error) {
	fams, err := seedfit.Families(r.MachineNetwork)
	if err != nil {
		return nil, fmt.Errorf("the rendered install-config: %w", err)
	}
	rec := &seedfit.Record{Version: seedfit.Version, IPFamilies: fams, FIPS: r.FIPS, ReleaseVersion: release.Version,
		ContainerStorageLabel: r.ContainerStorageLabel}
	if rec.ContainerStorageLabel == "" {
		rec.ContainerStorageLabel = inst.ContainerStorageLabel
	}
	if r.Target == oskind.OpenShift {
		proxy := r.Proxy
		rec.Proxy = &proxy
	}
	if release.Ref != "" {
		// lifecycle-agent's release_registry: the host part of the release pull spec
		// (utils/client_helper.go ExtractRegistryFromImage).
		rec.ReleaseRegistry, _, _ = strings.Cut(release.Ref, "/")
	}
	return rec, rec.Validate()
}

// sealRequest is what the node is asked to do. An OpenShift seed also gets the pinned
// recert and etcd images its reconfiguration runs.
func sealRequest(opts Options, in inputs) (wire.SealRequest, error) {
	req := wire.SealRequest{Version: wire.SealRequestVersion, Target: in.install.Out.Target, KeepPullSecret: opts.KeepPullSecret, Seed: opts.Name}
	lock, err := lockfile.ReadLock(in.resolve.Path(in.resolve.Out.Lock))
	if err != nil {
		return req, err
	}
	if req.Fit, err = siteFit(in.render.Out, in.install.Out, lock.Release); err != nil {
		return req, err
	}
	if opts.SiteConfigTimeout > 0 {
		req.SiteConfigTimeout = opts.SiteConfigTimeout.String()
	}
	if req.Target != oskind.OpenShift {
		// The conformance OS's seal clamps the root's file times to the source date.
		date, ok, err := seed.ParseSourceDateEpoch(opts.SourceDateEpoch)
		if ok {
			req.SourceDateEpoch = date.Unix()
		}
		return req, err
	}
	req.RequiredFiles = opts.RelocationFiles
	for _, im := range lock.Images {
		switch im.Name {
		case opts.RecertImage:
			req.RecertImage = im.Ref
		case etcdComponent:
			req.EtcdImage = im.Ref
		}
	}
	if req.RecertImage == "" || req.EtcdImage == "" {
		return req, fmt.Errorf("the lock pins no recert image (%s) or no release %s image: the seed could not be reconfigured at its site", opts.RecertImage, etcdComponent)
	}
	return req, nil
}

// siteIdentity reads the site identity secret and checks it is one; no error quotes it.
func siteIdentity(secrets pipeline.SecretSource) (string, error) {
	id, err := secrets.Secret(SecretSiteIdentity)
	if err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	if _, err := siteconfig.ParseIdentities(id); err != nil {
		return "", fmt.Errorf("seal: secret %s: %w", SecretSiteIdentity, err)
	}
	return string(id), nil
}

// etcdComponent is the release component recert edits the cluster through.
const etcdComponent = "etcd"
