package resolve

import (
	"context"
	"fmt"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/stages/internal/lockfile"

	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/stages/internal/registries"
)

// Info summarises a release for `snofactory release info`.
type Info struct {
	Ref        string `json:"ref"`
	Digest     string `json:"digest"`
	Version    string `json:"version"`
	Arch       string `json:"arch"`
	Components int    `json:"components"`
	// UniqueBlobs and UniqueBlobBytes count every distinct config and layer blob of the
	// release image and its components once (what precache fetches into an empty store);
	// TotalBlobBytes counts them per image, as a copy without deduplication would.
	UniqueBlobs     int                 `json:"uniqueBlobs"`
	UniqueBlobBytes int64               `json:"uniqueBlobBytes"`
	TotalBlobBytes  int64               `json:"totalBlobBytes"`
	ISO             *lockfile.LockedISO `json:"iso,omitempty"`
	Installer       string              `json:"installer,omitempty"`
}

// InfoRequest is what `snofactory release info` asks about a release.
type InfoRequest struct {
	Ref string
	// Arch is the node architecture in CoreOS naming (default x86_64).
	Arch string
	// AuthFile is a pull secret / auth file; "" uses the standard auth files.
	AuthFile string
	// RegistriesConf replaces the system registries.conf (mirrors).
	RegistriesConf string
	// Insecure lists registries reached over plain HTTP or without TLS verification.
	Insecure []string
	// Jobs is how many manifests are read in parallel (default 8).
	Jobs int
}

// secretAuthFile names the request's auth file among the secrets it hands to Resolve.
const secretAuthFile = "authFile"

// Describe resolves and sizes the release a request names (see ReleaseInfo). The auth file
// is read here, once, through smallfile (a regular file of at most pipeline.MaxSecretFile
// bytes, opened without blocking), and its bytes are what containers/image is given (in a
// private copy, registries.SystemContext), so a FIFO, a device or a huge file named as the
// auth file is bad input before any registry is asked.
func Describe(ctx context.Context, req InfoRequest) (*Info, error) {
	opts := Options{Release: req.Ref, Arch: req.Arch,
		Registry: registries.Config{Insecure: req.Insecure, RegistriesConf: req.RegistriesConf}}
	var secrets pipeline.SecretSource
	if req.AuthFile != "" {
		b, err := smallfile.Read(req.AuthFile, pipeline.MaxSecretFile)
		if err != nil {
			return nil, badinput.Errorf("the auth file: %w", err)
		}
		opts.Registry.PullSecret = secretAuthFile
		secrets = heldSecrets{secretAuthFile: b}
	}
	return ReleaseInfo(ctx, opts, Runtime{Secrets: secrets}, req.Jobs)
}

// heldSecrets serves secrets already read, so every SystemContext of one command sees the
// bytes that were checked, not whatever the path holds by then.
type heldSecrets map[string][]byte

func (h heldSecrets) Secret(name string) ([]byte, error) {
	b, ok := h[name]
	if !ok {
		return nil, fmt.Errorf("secret %q is not configured", name)
	}
	return b, nil
}

// ReleaseInfo resolves the release in opts (components, ISO; no extraction) and sizes its
// blobs by reading every component's manifest, jobs at a time.
func ReleaseInfo(ctx context.Context, opts Options, rt Runtime, jobs int) (*Info, error) {
	rt.OutDir = ""
	lock, err := Resolve(ctx, opts, rt)
	if err != nil {
		return nil, err
	}
	info := &Info{Ref: lock.Release.Ref, Digest: lock.Release.Digest, Version: lock.Release.Version, Arch: lock.Arch, ISO: lock.ISO}
	if lock.Installer != nil {
		info.Installer = lock.Installer.Ref
	}
	var refs []string
	for _, im := range lock.Images {
		if im.Source == lockfile.SourceRelease && im.Name != "release" {
			info.Components++
		}
		refs = append(refs, im.Ref)
	}
	var cl pipeline.Cleanups
	defer cl.Run()
	sys, err := registries.SystemContext(ctx, rt.Scratch, opts.Registry, rt.Secrets, lock.Arch, &cl)
	if err != nil {
		return nil, err
	}
	c, err := newClient(sys)
	if err != nil {
		return nil, err
	}
	if jobs <= 0 {
		jobs = 8
	}
	type blobs map[string]int64
	results := make([]blobs, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i, ref := range refs {
		if gctx.Err() != nil {
			break // a sizing failed; g.Wait returns its error
		}
		g.Go(func() error {
			im, err := c.open(gctx, ref)
			if err != nil {
				return fmt.Errorf("sizing %s: %w", ref, err)
			}
			defer im.Close()
			b := blobs{}
			cfg := im.manifest.ConfigInfo()
			b[cfg.Digest.String()] = cfg.Size
			for _, l := range im.manifest.LayerInfos() {
				b[l.Digest.String()] = l.Size
			}
			results[i] = b
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, b := range results {
		for d, size := range b {
			info.TotalBlobBytes += size
			if !seen[d] {
				seen[d] = true
				info.UniqueBlobs++
				info.UniqueBlobBytes += size
			}
		}
	}
	return info, nil
}
