package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
	"github.com/snofactory/snofactory/stages/internal/registries"
)

// InstallerPath is where the stage puts openshift-install, relative to its output.
const InstallerPath = "bin/openshift-install"

// ISOPath is where the stage puts a live ISO extracted from machine-os-images, relative to
// its output; the lock records it as iso.path.
const ISOPath = "iso/live.iso"

// Runtime is what a resolution needs besides its options: secrets, where to extract the
// installer ("" skips extraction), a private scratch directory and a logger.
type Runtime struct {
	Secrets pipeline.SecretSource
	OutDir  string
	// Scratch holds the registry configuration, pull secret included, while the resolution
	// runs: the stage's env.Scratch, which the engine removes even after a crash. "" means
	// the system temp directory (callers outside a stage run).
	Scratch string
	Log     *slog.Logger
}

// Resolve pins everything opts names and returns the lock.
func Resolve(ctx context.Context, opts Options, rt Runtime) (*lockfile.Lock, error) {
	if opts.Release == "" && opts.ISO == nil && opts.ISOPath == "" && len(opts.Images) == 0 && len(opts.Operators) == 0 && len(opts.Catalogs) == 0 {
		return nil, fmt.Errorf("nothing to resolve: no release image, live ISO or images")
	}
	log := rt.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	arch := opts.Arch
	if arch == "" {
		arch = "x86_64"
	}
	// The registry configuration lives for this call only.
	var cl pipeline.Cleanups
	defer cl.Run()
	sys, err := registries.SystemContext(ctx, rt.Scratch, opts.Registry, rt.Secrets, arch, &cl)
	if err != nil {
		return nil, err
	}
	c, err := newClient(sys)
	if err != nil {
		return nil, err
	}

	lock := &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion, Arch: arch}
	if opts.Release != "" {
		if err := c.resolveRelease(ctx, opts, rt, log, lock); err != nil {
			return nil, err
		}
	}
	if opts.ISO != nil || opts.ISOPath != "" {
		iso, err := blueprintISO(opts)
		if err != nil {
			return nil, err
		}
		lock.ISO = iso
	}

	for _, b := range opts.Operators {
		imgs, err := c.operatorImages(ctx, b)
		if err != nil {
			return nil, err
		}
		lock.Images = append(lock.Images, imgs...)
	}
	if len(opts.Catalogs) > 0 {
		imgs, err := c.resolveCatalogs(ctx, opts.Catalogs, log)
		if err != nil {
			return nil, err
		}
		lock.Images = append(lock.Images, imgs...)
	}
	for _, ref := range opts.Images {
		pinned, dg, err := c.digestOf(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("extra image: %w", err)
		}
		lock.Images = append(lock.Images, lockfile.LockedImage{Name: ref, Ref: pinned, Digest: dg.String(), Source: lockfile.SourceExtra})
	}
	lock.Normalize()
	return lock, nil
}

func extractInstaller(ctx context.Context, c *client, t *lockfile.LockedTool, outDir string) error {
	im, err := c.open(ctx, t.Ref)
	if err != nil {
		return fmt.Errorf("installer image: %w", err)
	}
	defer im.Close()
	dst := filepath.Join(outDir, filepath.FromSlash(InstallerPath))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	sum, err := c.extractFile(ctx, im, installerBinary, dst)
	if err != nil {
		return fmt.Errorf("extracting openshift-install: %w", err)
	}
	t.Path = InstallerPath
	t.SHA256 = sum.Encoded()
	return nil
}

// extractISO writes the ISO an image:// lock entry names to ISOPath under outDir and
// records its sha256. The image's own checksum file beside the ISO (<iso>.sha256), when
// present, must agree with what was extracted.
func extractISO(ctx context.Context, c *client, iso *lockfile.LockedISO, outDir string) error {
	ref, name, ok := lockfile.ParseImageURL(iso.URL)
	if !ok {
		return fmt.Errorf("live ISO %s is not an image:// URL", iso.URL)
	}
	im, err := c.open(ctx, ref)
	if err != nil {
		return fmt.Errorf("live ISO image: %w", err)
	}
	defer im.Close()
	dst := filepath.Join(outDir, filepath.FromSlash(ISOPath))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	sum, side, err := c.extractFileWith(ctx, im, name, dst, name+".sha256")
	if err != nil {
		return fmt.Errorf("extracting the live ISO: %w", err)
	}
	if err := os.Chmod(dst, 0o644); err != nil {
		return err
	}
	if side != nil {
		want, err := parseChecksumFile(side)
		if err != nil {
			return fmt.Errorf("live ISO %s: %s.sha256: %w", ref, name, err)
		}
		if want != sum.Encoded() {
			return fmt.Errorf("live ISO %s: %s has sha256 %s, but %s.sha256 in the image says %s", ref, name, sum.Encoded(), name, want)
		}
	}
	iso.Path = ISOPath
	iso.SHA256 = sum.Encoded()
	return nil
}

// parseChecksumFile reads the digest of a sha256sum-style file ("<hex>  <name>", or the bare
// hex digest).
func parseChecksumFile(b []byte) (string, error) {
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return "", errors.New("empty checksum file")
	}
	sum := strings.ToLower(fields[0])
	if _, err := hex.DecodeString(sum); err != nil || len(sum) != sha256.Size*2 {
		return "", fmt.Errorf("%q is not a sha256 digest", fields[0])
	}
	return sum, nil
}

// csv is the part of a ClusterServiceVersion we read.
type csv struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		RelatedImages []struct {
			Name  string `yaml:"name"`
			Image string `yaml:"image"`
		} `yaml:"relatedImages"`
	} `yaml:"spec"`
}

// operatorImages pins a bundle and the images its ClusterServiceVersion relates.
func (c *client) operatorImages(ctx context.Context, bundle string) ([]lockfile.LockedImage, error) {
	im, err := c.open(ctx, bundle)
	if err != nil {
		return nil, fmt.Errorf("operator bundle: %w", err)
	}
	defer im.Close()
	source := lockfile.SourceOperator + ":" + bundle
	out := []lockfile.LockedImage{{Name: "bundle", Ref: im.pinned(), Digest: im.digest.String(), Source: source}}
	files, err := c.readFiles(ctx, im, func(n string) bool {
		return path.Dir(n) == "manifests" && (strings.HasSuffix(n, ".clusterserviceversion.yaml") || strings.HasSuffix(n, ".clusterserviceversion.yml"))
	})
	if err != nil {
		return nil, fmt.Errorf("operator bundle %s: %w", bundle, err)
	}
	seen := map[string]bool{}
	for name, b := range files {
		var v csv
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("operator bundle %s: parsing %s: %w", bundle, name, err)
		}
		related := map[string]string{}
		for _, r := range v.Spec.RelatedImages {
			related[r.Image] = r.Name
		}
		if ci := v.Metadata.Annotations["containerImage"]; ci != "" {
			if _, ok := related[ci]; !ok {
				related[ci] = "operator"
			}
		}
		for ref, rname := range related {
			if ref == "" || seen[ref] {
				continue
			}
			seen[ref] = true
			pinned, dg, err := c.digestOf(ctx, ref)
			if err != nil {
				return nil, fmt.Errorf("operator bundle %s: related image %s: %w", bundle, rname, err)
			}
			if rname == "" {
				rname = ref
			}
			out = append(out, lockfile.LockedImage{Name: rname, Ref: pinned, Digest: dg.String(), Source: source})
		}
	}
	return out, nil
}

// resolveRelease pins the release image, its components, its live ISO and its installer.
func (c *client) resolveRelease(ctx context.Context, opts Options, rt Runtime, log *slog.Logger, lock *lockfile.Lock) error {
	rel, err := c.open(ctx, opts.Release)
	if err != nil {
		return err
	}
	defer rel.Close()
	log.Info("resolved release image", "ref", opts.Release, "digest", rel.digest)
	p, err := c.readPayload(ctx, rel)
	if err != nil {
		return err
	}
	lock.Release = lockfile.LockedRelease{Ref: opts.Release, Digest: rel.digest.String(), Version: p.version}
	lock.Images = append(lock.Images, lockfile.LockedImage{Name: "release", Ref: rel.pinned(), Digest: rel.digest.String(), Source: lockfile.SourceRelease})
	arch := lock.Arch
	byName := map[string]lockfile.LockedImage{}
	for _, comp := range p.components {
		pinned, dg, err := c.digestOf(ctx, comp.ref)
		if err != nil {
			return fmt.Errorf("release component %s: %w", comp.name, err)
		}
		im := lockfile.LockedImage{Name: comp.name, Ref: pinned, Digest: dg.String(), Source: lockfile.SourceRelease}
		byName[comp.name] = im
		lock.Images = append(lock.Images, im)
	}
	log.Info("listed release components", "version", p.version, "components", len(p.components))

	if p.bootimages != nil {
		if lock.ISO, err = liveISO(p.bootimages, arch); err != nil {
			return fmt.Errorf("release %s: %w", opts.Release, err)
		}
	} else if mos, ok := byName[machineOSImages]; ok {
		// Newer payloads ship the ISO only inside machine-os-images: pin it by the image
		// digest and, when there is an output, extract it for the live-iso stage.
		lock.ISO = &lockfile.LockedISO{URL: lockfile.ImageURL(mos.Ref, "/coreos/coreos-"+arch+".iso"), From: machineOSImages}
		if rt.OutDir != "" {
			log.Info("extracting the live ISO from machine-os-images", "ref", mos.Ref)
			if err := extractISO(ctx, c, lock.ISO, rt.OutDir); err != nil {
				return err
			}
			log.Info("extracted the live ISO", "sha256", lock.ISO.SHA256)
		}
	} else {
		log.Warn("release carries no coreos-bootimages stream and no machine-os-images component; no live ISO pinned")
	}

	if inst, ok := byName[installerComponent]; ok {
		lock.Installer = &lockfile.LockedTool{Ref: inst.Ref, Digest: inst.Digest}
		if rt.OutDir != "" {
			if err := extractInstaller(ctx, c, lock.Installer, rt.OutDir); err != nil {
				return err
			}
			log.Info("extracted openshift-install", "sha256", lock.Installer.SHA256)
		}
	} else {
		log.Warn("release has no installer component; render cannot run openshift-install")
	}

	return nil
}

// blueprintISO pins the live ISO the blueprint names itself (a URL with its checksum, or a
// local file whose checksum is computed here).
func blueprintISO(opts Options) (*lockfile.LockedISO, error) {
	if opts.ISO != nil {
		return &lockfile.LockedISO{URL: opts.ISO.URL, SHA256: opts.ISO.SHA256, From: "blueprint"}, nil
	}
	f, err := smallfile.Open(opts.ISOPath)
	if err != nil {
		return nil, fmt.Errorf("live ISO: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("live ISO %s: %w", opts.ISOPath, err)
	}
	label := opts.ISOLabel
	if label == "" {
		label = opts.ISOPath
	}
	return &lockfile.LockedISO{Path: label, SHA256: hex.EncodeToString(h.Sum(nil)), From: "blueprint"}, nil
}
