package precache

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/types"
	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/stages/internal/registries"
	"golang.org/x/sync/errgroup"
)

// Image is one image to precache, pinned by digest.
type Image struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// Config is one precache run.
type Config struct {
	Images []Image
	Store  *Store
	// Sys carries mirrors (registries.conf), auth files and the signature policy.
	Sys *types.SystemContext
	// Jobs is the number of parallel blob transfers (default 6).
	Jobs int
	// Attempts per source for a transient failure (default 8), with exponential backoff from
	// RetryBase (default 200ms) up to RetryMax (default 10s).
	Attempts  int
	RetryBase time.Duration
	RetryMax  time.Duration
	// Stall aborts and retries a transfer that receives nothing for this long (default 60s).
	Stall time.Duration
	// Arch and OS choose the instance of a manifest list (default amd64, linux).
	Arch, OS string
	// Progress receives images and bytes done/total; nil ignores them.
	Progress func(what string, done, total int64, unit string)
	Log      *slog.Logger
}

// Report says what a precache run did.
type Report struct {
	Images       int           `json:"images"`
	Blobs        int           `json:"blobs"`
	BlobsFetched int           `json:"blobsFetched"`
	BlobsReused  int           `json:"blobsReused"`
	BytesTotal   int64         `json:"bytesTotal"`
	BytesFetched int64         `json:"bytesFetched"`
	BytesReused  int64         `json:"bytesReused"`
	Manifests    int           `json:"manifests"`
	ManifestsGot int           `json:"manifestsFetched"`
	Retries      int64         `json:"retries"`
	Seconds      float64       `json:"seconds"`
	List         []ImageReport `json:"imageList"`
}

// ImageReport is one image in the report.
type ImageReport struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Instance is the platform manifest chosen from a manifest list ("" for single images).
	Instance string `json:"instance,omitempty"`
	Blobs    int    `json:"blobs"`
	Bytes    int64  `json:"bytes"`
}

// descriptor is the part of an OCI/Docker descriptor we read.
type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    digest.Digest
	Size      int64 `json:"size"`
	Platform  *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Variant      string `json:"variant"`
	} `json:"platform,omitempty"`
}

// manifestDoc is any manifest or index we store.
type manifestDoc struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        *descriptor  `json:"config"`
	Layers        []descriptor `json:"layers"`
	Manifests     []descriptor `json:"manifests"`
}

// pinnedImage is an image whose manifests are in the store.
type pinnedImage struct {
	Image
	named     reference.Named
	mediaType string        // of the top manifest
	size      int64         // of the top manifest
	manifests []descriptor  // top manifest, then the chosen instance if it is a list
	blobs     []descriptor  // config and layers
	instance  digest.Digest // "" for single images
}

// Result is the outcome of Precache: the report and what the layout needs.
type Result struct {
	Report Report
	images []*pinnedImage
}

// Precache copies every image's manifests and blobs into the store and returns the report.
func Precache(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	cfg.defaults()
	r := newRemote(cfg.Sys, cfg.Jobs, retryPolicy{attempts: cfg.Attempts, base: cfg.RetryBase, max: cfg.RetryMax, stall: cfg.Stall})
	defer r.close()
	res := &Result{}
	rep := &res.Report
	rep.Images = len(cfg.Images)

	if cfg.Sys != nil && cfg.Sys.SignaturePolicyPath != "" {
		if err := checkPolicy(ctx, cfg); err != nil {
			return nil, err
		}
	}

	// Manifests first: they name the blobs. A stored manifest costs no request.
	images := make([]*pinnedImage, len(cfg.Images))
	var manifestsGot atomic.Int64
	err := parallel(ctx, cfg.Jobs, len(cfg.Images), func(ctx context.Context, i int) error {
		pi, got, err := pinManifests(ctx, r, cfg, cfg.Images[i])
		images[i] = pi
		manifestsGot.Add(int64(got))
		return err
	})
	if err != nil {
		return nil, err
	}
	res.images = images
	rep.ManifestsGot = int(manifestsGot.Load())

	// Unique blobs across images; each is fetched once, from the first image naming it.
	type blob struct {
		desc  descriptor
		ref   reference.Named
		users []int
	}
	byDigest := map[digest.Digest]*blob{}
	var order []*blob
	for i, im := range images {
		rep.Manifests += len(im.manifests)
		ir := ImageReport{Name: im.Name, Ref: im.Ref, Digest: im.Digest, Instance: im.instance.String(), Blobs: len(im.blobs)}
		for _, d := range im.blobs {
			ir.Bytes += d.Size
			b, ok := byDigest[d.Digest]
			if !ok {
				b = &blob{desc: d, ref: im.named}
				byDigest[d.Digest] = b
				order = append(order, b)
			}
			b.users = append(b.users, i)
		}
		rep.List = append(rep.List, ir)
	}
	remaining := make([]atomic.Int64, len(images))
	for _, b := range order {
		for _, u := range b.users {
			remaining[u].Add(1)
		}
	}
	var todo []*blob
	var imagesDone atomic.Int64
	for i := range images {
		if remaining[i].Load() == 0 {
			imagesDone.Add(1)
		}
	}
	finish := func(b *blob) {
		for _, u := range b.users {
			if remaining[u].Add(-1) == 0 {
				imagesDone.Add(1)
			}
		}
	}
	for _, b := range order {
		rep.Blobs++
		rep.BytesTotal += b.desc.Size
		if cfg.Store.Has(b.desc.Digest, b.desc.Size) {
			rep.BlobsReused++
			rep.BytesReused += b.desc.Size
			finish(b)
			continue
		}
		todo = append(todo, b)
	}
	// Largest first, so the long transfers overlap with the many small ones.
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].desc.Size > todo[j].desc.Size })
	cfg.Log.Info("precache plan", "images", rep.Images, "blobs", rep.Blobs, "to_fetch", len(todo),
		"bytes_total", rep.BytesTotal, "bytes_reused", rep.BytesReused)

	var done, fetched atomic.Int64
	var fetchedBlobs, fetchedBlobBytes atomic.Int64
	done.Store(rep.BytesReused)
	report := func() {
		cfg.Progress("images", imagesDone.Load(), int64(rep.Images), "images")
		cfg.Progress("bytes", min(done.Load(), rep.BytesTotal), rep.BytesTotal, "bytes")
	}
	report()
	tick := time.NewTicker(500 * time.Millisecond)
	stopTick := make(chan struct{})
	var tickWG sync.WaitGroup
	tickWG.Add(1)
	go func() {
		defer tickWG.Done()
		for {
			select {
			case <-tick.C:
				report()
			case <-stopTick:
				return
			}
		}
	}()
	err = parallel(ctx, cfg.Jobs, len(todo), func(ctx context.Context, i int) error {
		b := todo[i]
		var counted int64
		n, err := r.fetchBlob(ctx, cfg.Store, b.ref, b.desc.Digest, b.desc.Size, func(k int64) {
			counted += k
			done.Add(k)
		})
		fetched.Add(n)
		if err != nil {
			return err
		}
		// Count the blob as done by its size, whatever the retries cost.
		done.Add(b.desc.Size - counted)
		if n > 0 {
			fetchedBlobs.Add(1)
			fetchedBlobBytes.Add(b.desc.Size)
		}
		finish(b)
		return nil
	})
	tick.Stop()
	close(stopTick)
	tickWG.Wait()
	rep.BytesFetched = fetched.Load()
	rep.Retries = r.retries.Load()
	rep.Seconds = time.Since(start).Seconds()
	if err != nil {
		return res, err
	}
	// Blobs another build finished while we waited for its lock count as reused.
	rep.BlobsFetched = int(fetchedBlobs.Load())
	rep.BlobsReused = rep.Blobs - rep.BlobsFetched
	rep.BytesReused = rep.BytesTotal - fetchedBlobBytes.Load()
	report()
	return res, nil
}

func (cfg *Config) defaults() {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 6
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 8
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 200 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.Stall <= 0 {
		cfg.Stall = time.Minute
	}
	if cfg.Arch == "" {
		cfg.Arch = "amd64"
	}
	if cfg.OS == "" {
		cfg.OS = "linux"
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, int64, int64, string) {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Sys == nil {
		cfg.Sys = &types.SystemContext{}
	}
}

// pinManifests makes sure the image's manifest (and platform instance) are in the store and
// lists its blobs. got is the number of manifests fetched from a registry.
func pinManifests(ctx context.Context, r *remote, cfg Config, img Image) (*pinnedImage, int, error) {
	named, err := reference.ParseNormalizedNamed(img.Ref)
	if err != nil {
		return nil, 0, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	d, err := digest.Parse(img.Digest)
	if err != nil {
		return nil, 0, fmt.Errorf("image %s: digest: %w", img.Ref, err)
	}
	pi := &pinnedImage{Image: img, named: named}
	got := 0
	// The media type comes from the manifest itself, never from a response header, so a
	// layout made from the store is the same as one made from the registry.
	load := func(d digest.Digest) (*manifestDoc, []byte, string, error) {
		b, err := cfg.Store.Read(d)
		if err != nil {
			if b, _, err = r.fetchManifest(ctx, named, d); err != nil {
				return nil, nil, "", err
			}
			if err := cfg.Store.Put(d, b); err != nil {
				return nil, nil, "", err
			}
			got++
		} else if d.Algorithm().FromBytes(b) != d {
			return nil, nil, "", fmt.Errorf("stored manifest %s is corrupt: remove %s", d, cfg.Store.Path(d))
		}
		var m manifestDoc
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, nil, "", fmt.Errorf("manifest %s of %s: %w", d, img.Ref, err)
		}
		if m.SchemaVersion != 2 {
			return nil, nil, "", fmt.Errorf("manifest %s of %s: schema version %d is not supported", d, img.Ref, m.SchemaVersion)
		}
		mt := m.MediaType
		if mt == "" {
			mt = guessMediaType(&m)
		}
		return &m, b, mt, nil
	}
	m, b, mt, err := load(d)
	if err != nil {
		return nil, got, err
	}
	pi.mediaType, pi.size = mt, int64(len(b))
	pi.manifests = append(pi.manifests, descriptor{MediaType: mt, Digest: d, Size: int64(len(b))})
	if len(m.Manifests) > 0 {
		inst, err := choose(m.Manifests, cfg.Arch, cfg.OS)
		if err != nil {
			return nil, got, fmt.Errorf("image %s: %w", img.Ref, err)
		}
		im, ib, imt, err := load(inst.Digest)
		if err != nil {
			return nil, got, err
		}
		pi.instance = inst.Digest
		pi.manifests = append(pi.manifests, descriptor{MediaType: imt, Digest: inst.Digest, Size: int64(len(ib))})
		m = im
	}
	if m.Config == nil {
		return nil, got, fmt.Errorf("image %s: manifest has no config", img.Ref)
	}
	pi.blobs = append(pi.blobs, *m.Config)
	pi.blobs = append(pi.blobs, m.Layers...)
	for _, b := range pi.blobs {
		if err := b.Digest.Validate(); err != nil {
			return nil, got, fmt.Errorf("image %s: %w", img.Ref, err)
		}
	}
	return pi, got, nil
}

func guessMediaType(m *manifestDoc) string {
	if len(m.Manifests) > 0 {
		return "application/vnd.oci.image.index.v1+json"
	}
	return "application/vnd.oci.image.manifest.v1+json"
}

// choose picks the platform instance of a manifest list.
func choose(ms []descriptor, arch, os string) (descriptor, error) {
	for _, d := range ms {
		if d.Platform != nil && d.Platform.Architecture == arch && d.Platform.OS == os {
			return d, nil
		}
	}
	return descriptor{}, fmt.Errorf("manifest list has no %s/%s image", os, arch)
}

// checkPolicy asks the signature policy whether every image may be used.
func checkPolicy(ctx context.Context, cfg Config) error {
	policy, err := registries.OpenPolicy(cfg.Sys)
	if err != nil {
		return err
	}
	for _, img := range cfg.Images {
		if err := policy.AllowRef(ctx, img.Ref); err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn(0..n-1) on up to jobs goroutines; the first error cancels the rest.
func parallel(parent context.Context, jobs, n int, fn func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(parent)
	g.SetLimit(max(jobs, 1))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(ctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return parent.Err()
}
