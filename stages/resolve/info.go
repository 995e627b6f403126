package resolve

import (
	"context"
	"fmt"
	"sync"

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
	UniqueBlobs     int        `json:"uniqueBlobs"`
	UniqueBlobBytes int64      `json:"uniqueBlobBytes"`
	TotalBlobBytes  int64      `json:"totalBlobBytes"`
	ISO             *LockedISO `json:"iso,omitempty"`
	Installer       string     `json:"installer,omitempty"`
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
		if im.Source == SourceRelease && im.Name != "release" {
			info.Components++
		}
		refs = append(refs, im.Ref)
	}
	sys, cleanup, err := registries.SystemContext(ctx, rt.Scratch, opts.Registry, rt.Secrets, lock.Arch)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	c, err := newClient(sys)
	if err != nil {
		return nil, err
	}
	if jobs <= 0 {
		jobs = 8
	}
	type blobs map[string]int64
	results := make([]blobs, len(refs))
	errs := make([]error, len(refs))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			im, err := c.open(ctx, ref)
			if err != nil {
				errs[i] = err
				return
			}
			defer im.Close()
			b := blobs{}
			cfg := im.manifest.ConfigInfo()
			b[cfg.Digest.String()] = cfg.Size
			for _, l := range im.manifest.LayerInfos() {
				b[l.Digest.String()] = l.Size
			}
			results[i] = b
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, b := range results {
		if errs[i] != nil {
			return nil, fmt.Errorf("sizing %s: %w", refs[i], errs[i])
		}
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
