package stages

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/stages/install"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"github.com/snofactory/snofactory/stages/liveiso"
	"github.com/snofactory/snofactory/stages/precache"
	"github.com/snofactory/snofactory/stages/publish"
	"github.com/snofactory/snofactory/stages/render"
	"github.com/snofactory/snofactory/stages/resolve"
	"github.com/snofactory/snofactory/stages/seal"
	"github.com/snofactory/snofactory/stages/validate"
)

// arch is the node architecture, in CoreOS naming. Seeds are x86_64 for now.
const arch = "x86_64"

// stageOptions is a blueprint mapped onto the options of each stage.
type stageOptions struct {
	resolve  resolve.Options
	render   render.Options
	liveISO  liveiso.StageOptions
	precache precache.Options
	install  install.Options
	validate validate.StageOptions
	seal     seal.Options
	publish  publish.Options
}

// mapBlueprint maps the blueprint onto every stage's options, reading each blueprint
// setting once.
func mapBlueprint(bp *v1alpha1.Blueprint) stageOptions {
	reg := registryConfig(bp)
	var isoMissing string
	if err := bp.CheckISO(); err != nil {
		isoMissing = err.Error()
	}
	return stageOptions{
		resolve:  resolveOptions(bp, reg, isoMissing),
		render:   renderOptions(bp),
		liveISO:  liveISOOptions(bp, isoMissing),
		precache: precache.Options{Registry: reg, Arch: arch},
		install:  installOptions(bp),
		validate: validateOptions(bp),
		seal:     sealOptions(bp),
		publish:  publishOptions(bp),
	}
}

// sealOptions maps spec.outputs onto the seal stage; the blueprint digest is of its
// normalized content, so a comment does not make a new seed.
func sealOptions(bp *v1alpha1.Blueprint) seal.Options {
	v, o := bp.Spec.VM, bp.Spec.Outputs
	var dg string
	if b, err := json.Marshal(bp); err == nil {
		dg = digest.FromBytes(b).String()
	}
	return seal.Options{
		SourceDateEpoch: os.Getenv("SOURCE_DATE_EPOCH"),
		Name:            bp.Metadata.Name, BlueprintDigest: dg, Formats: o.Formats, KeepPullSecret: o.KeepPullSecret,
		Recipients: o.CredentialsRecipients, ReconfigurationAPIVersion: siteconfig.APIVersion,
		SiteConfigTimeout: bp.Spec.Relocation.SiteConfigTimeout.D(), RecertImage: bp.Spec.Relocation.RecertImage,
		RelocationFiles: relocationFiles(bp), SiteIdentity: bp.Spec.Relocation.SiteConfigIdentity != "",
		CPUs: v.CPUs, MemoryMiB: int(v.Memory.MiB()), Accelerator: v.Accelerator, BootTimeout: v.Timeouts.Boot.D(),
		ClusterTimeout: v.Timeouts.Cluster.D(),
	}
}

// relocationFiles are what an OpenShift node must hold before it is sealed.
func relocationFiles(bp *v1alpha1.Blueprint) []string {
	if bp.Spec.Target.Type != oskind.OpenShift {
		return nil
	}
	return render.RelocationFiles()
}

// publishOptions maps spec.outputs.push and ociLayout (relative to the blueprint).
func publishOptions(bp *v1alpha1.Blueprint) publish.Options {
	o := publish.Options{Push: bp.Spec.Outputs.Push}
	if bp.Spec.Outputs.OCILayout != "" {
		o.OCILayout = bp.Path(bp.Spec.Outputs.OCILayout)
	}
	return o
}

// validateOptions maps spec.validation (skips with their reasons) and the shipment window
// the certificates must cover.
func validateOptions(bp *v1alpha1.Blueprint) validate.StageOptions {
	v := bp.Spec.VM
	o := validate.StageOptions{CPUs: v.CPUs, MemoryMiB: int(v.Memory.MiB()), Accelerator: v.Accelerator,
		BootTimeout: v.Timeouts.Boot.D(), ClusterTimeout: v.Timeouts.Cluster.D(), ShipmentWindow: bp.Spec.Relocation.KubeletCertValidity.D()}
	for _, id := range bp.Spec.Validation.Skip {
		if o.Skip == nil {
			o.Skip = map[string]string{}
		}
		o.Skip[id] = bp.Spec.Validation.SkipReasons[id]
	}
	return o
}

// installOptions maps the blueprint's VM onto the install stage. Each phase is bounded by
// the blueprint timeout of the part of the install it belongs to: the live boot, the
// install proper, or (OpenShift) the cluster settling after the reboot.
func installOptions(bp *v1alpha1.Blueprint) install.Options {
	v := bp.Spec.VM
	t := v.Timeouts
	o := install.Options{
		Target:      bp.Spec.Target.Type,
		CPUs:        v.CPUs,
		MemoryMiB:   int(v.Memory.MiB()),
		DiskSizeMiB: int(v.DiskSize.MiB()),
		Firmware:    v.Firmware,
		Accelerator: v.Accelerator,
		// The build's environment, in the options so that it keys the stage.
		SourceDateEpoch: os.Getenv("SOURCE_DATE_EPOCH"),
		DefaultTimeout:  t.Install.D(),
		Timeouts:        map[string]time.Duration{wire.PhaseLiveBooted: t.Boot.D()},
	}
	if cs := bp.Spec.Disk.ContainerStorage; cs != nil && o.Target == oskind.CoreOS {
		// Placed on the factory disk as for OpenShift; validation checked it fits.
		at, _ := cs.StartBytes(v.DiskSize)
		o.ContainerStorage = &wire.InstallPartition{Number: cs.Number, Label: cs.Label, StartMiB: int64(at / v1alpha1.MiB)}
	}
	if o.Target == oskind.OpenShift {
		for _, p := range []string{wire.PhaseAPIUp, wire.PhaseBootstrapComplete, wire.PhaseInstallComplete} {
			o.Timeouts[p] = t.Cluster.D()
		}
	}
	return o
}

// Secrets are the secrets a blueprint's stages may read, by the names the stages use
// (render.SecretPullSecret, render.SecretSSHKey).
func Secrets(bp *v1alpha1.Blueprint) pipeline.SecretSource {
	var s pipeline.SecretSet
	if osh := bp.Spec.OpenShift; osh != nil {
		s.Files = pipeline.SecretFiles{render.SecretPullSecret: bp.Resolved.PullSecretFile}
		if bp.Resolved.SSHPublicKeyFile != "" {
			s.Files[render.SecretSSHKey] = bp.Resolved.SSHPublicKeyFile
		} else if osh.SSHPublicKey != "" {
			s.Values = map[string][]byte{render.SecretSSHKey: []byte(osh.SSHPublicKey)}
		}
	}
	if f := bp.Resolved.SiteConfigIdentity; f != "" {
		if s.Files == nil {
			s.Files = pipeline.SecretFiles{}
		}
		s.Files[seal.SecretSiteIdentity] = f
	}
	return s
}

// signingKey is the key a build signs its seed with: build --sign-by's, else the
// blueprint's spec.outputs.signing; key is empty when the seed is not signed.
type signingKey struct {
	key, passphraseFile string
}

func signing(bp *v1alpha1.Blueprint, opts Options) signingKey {
	if opts.SignKey != "" {
		return signingKey{key: opts.SignKey, passphraseFile: opts.SignPassphraseFile}
	}
	if bp.Spec.Outputs.Signing != nil {
		return signingKey{key: bp.Resolved.SigningKey, passphraseFile: bp.Resolved.SigningPassphraseFile}
	}
	return signingKey{}
}

// secrets are Secrets with the signing key and its passphrase, which only publish reads.
func secrets(bp *v1alpha1.Blueprint, sign signingKey) pipeline.SecretSource {
	return signingSecrets{SecretSource: Secrets(bp), signingKey: sign}
}

type signingSecrets struct {
	pipeline.SecretSource
	signingKey
}

func (s signingSecrets) Secret(name string) ([]byte, error) {
	switch {
	case name == publish.SecretSigningKey && s.key != "":
		return pipeline.SecretFiles{name: s.key}.Secret(name)
	case name == publish.SecretSigningPassphrase && s.key != "":
		return trust.Passphrase(s.passphraseFile, trust.PassphraseEnv)
	}
	return s.SecretSource.Secret(name)
}

// CheckSigning opens the key the build will sign with, if any, so a missing key or a wrong
// passphrase is bad input before the build starts rather than a failure at its end.
func CheckSigning(bp *v1alpha1.Blueprint, opts Options) error {
	sign := signing(bp, opts)
	if sign.key == "" {
		return nil
	}
	if bp.Spec.Outputs.Push == "" {
		return fmt.Errorf("signing needs spec.outputs.push: signatures are attached in a registry")
	}
	pass, err := trust.Passphrase(sign.passphraseFile, trust.PassphraseEnv)
	if err != nil {
		return fmt.Errorf("the signing key's passphrase: %w", err)
	}
	if _, err := trust.LoadSigner(sign.key, pass, ""); err != nil {
		return fmt.Errorf("the signing key: %w", err)
	}
	return nil
}

// registryConfig is how resolve and precache reach the blueprint's registries; both enforce
// its signature policy (resolve on the release whose installer render executes, precache on
// every image).
func registryConfig(bp *v1alpha1.Blueprint) registries.Config {
	s := bp.Spec
	refs := append([]string{}, s.ExtraImages...)
	var mirrors []registries.Mirror
	for _, m := range s.RegistryMirrors {
		mirrors = append(mirrors, registries.Mirror{Source: m.Source, Mirrors: m.Mirrors})
	}
	if s.OpenShift != nil {
		refs = append(refs, openshiftImages(bp)...)
	}
	c := registries.ForImages(refs, mirrors)
	if s.OpenShift != nil {
		c.PullSecret = render.SecretPullSecret
	}
	c.PolicyFile = bp.Resolved.SignaturePolicyFile
	return c
}

// openshiftImages are the images an OpenShift blueprint names besides its extra images.
func openshiftImages(bp *v1alpha1.Blueprint) []string {
	osh := bp.Spec.OpenShift
	refs := []string{osh.ReleaseImage, bp.Spec.Relocation.RecertImage}
	for _, op := range osh.Operators {
		refs = append(refs, op.Bundle, op.Catalog)
	}
	return refs
}

func resolveOptions(bp *v1alpha1.Blueprint, reg registries.Config, isoMissing string) resolve.Options {
	s := bp.Spec
	o := resolve.Options{Arch: arch, Images: s.ExtraImages, Registry: reg}
	if osh := s.OpenShift; osh != nil {
		o.Release = osh.ReleaseImage
		// The seed's reconfiguration runs recert at the site: pinned and precached like
		// the extra images.
		o.Images = append(append([]string{}, s.ExtraImages...), s.Relocation.RecertImage)
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
			o.ISOPath, o.ISOLabel, o.ISOMissing = bp.Resolved.ISO, src.Path, isoMissing
		}
	}
	return o
}

// liveISOOptions embeds render's config into the blueprint's ISO (a local file or a URL)
// or, for OpenShift without a source, the release's RHCOS ISO pinned by resolve.
func liveISOOptions(bp *v1alpha1.Blueprint, isoMissing string) liveiso.StageOptions {
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
		o.ISOPath, o.ISOMissing = bp.Resolved.ISO, isoMissing
	default:
		o.ISOFromResolve = true
	}
	return o
}

// renderOptions maps the blueprint onto the render stage's options.
func renderOptions(bp *v1alpha1.Blueprint) render.Options {
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
	// The site keys go onto the node whatever the target; keyed by content, like fragments.
	for i, k := range s.Relocation.SiteConfigKeys {
		label := filepath.ToSlash(k)
		o.SiteKeys = append(o.SiteKeys, label)
		o.HostFiles[label] = bp.Resolved.SiteConfigKeys[i]
	}
	if s.Target.Type != oskind.OpenShift || s.OpenShift == nil {
		return o
	}
	osh := s.OpenShift
	// A tag that starts with the version names it; otherwise (a release pinned by digest)
	// render takes it from the release resolve locked.
	version, _ := render.ReleaseVersion(osh.ReleaseImage)
	c := &render.OpenShift{
		Version:          version,
		ClusterName:      osh.ClusterName,
		BaseDomain:       osh.BaseDomain,
		InstallationDisk: osh.InstallDisk,
		ServiceNetwork:   osh.ServiceNetwork,
		ReleaseImage:     osh.ReleaseImage,
		FIPS:             osh.FIPS,
	}
	if p := osh.Proxy; p != nil {
		c.Proxy = &render.Proxy{HTTPProxy: p.HTTPProxy, HTTPSProxy: p.HTTPSProxy, NoProxy: p.NoProxy}
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
	if cs := s.Disk.ContainerStorage; cs != nil {
		// Placed on the factory disk, which the seed is an image of; validation checked it fits.
		at, _ := cs.StartBytes(s.VM.DiskSize)
		c.ContainerStorage = &render.ContainerStorage{StartMiB: int64(at / v1alpha1.MiB), Label: cs.Label, Number: cs.Number}
	}
	o.OpenShift = c
	o.Relocation = &render.Relocation{InternalIP: s.Relocation.NodeIP, ShipmentWindow: s.Relocation.KubeletCertValidity.String()}
	o.WorkerIgnition = osh.WorkerIgnition
	o.SSHKey = osh.SSHPublicKey != "" || osh.SSHPublicKeyFile != ""
	o.FromResolve = true
	return o
}

// ClusterCheckProfile is what a blueprint sets for `snofactory cluster check`: the checks
// it skips (with their reasons) and the certificate window.
func ClusterCheckProfile(bp *v1alpha1.Blueprint) (skip map[string]string, opts validate.Options) {
	vo := validateOptions(bp)
	return vo.Skip, validate.Options{ShipmentWindow: vo.ShipmentWindow}
}

// CheckLock reads the lock file a build --locked will hold the resolution to, before any
// stage runs: one that is missing, not a regular file, over its cap or malformed is the
// user's input, refused up front rather than by the resolve stage as a failed build.
func CheckLock(path string) error {
	_, err := resolve.ReadLock(path)
	return err
}
