package precache

import (
	"context"
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
	"github.com/snofactory/snofactory/pipeline/blobstore"
	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/pipeline/strictjson"
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
	Store  *blobstore.Store
	// Sys carries mirrors (registries.conf), auth files and the signature policy.
	Sys *types.SystemContext
	// Jobs is the number of parallel blob transfers (default 6).
	Jobs int
	// Attempts per source for a transient failure, with exponential backoff from RetryBase
	// up to RetryMax; unset, the project's one policy (netlimit.DefaultPolicy). A transfer
	// that stalls fails after the stall timeout the context carries (netlimit).
	Attempts  int
	RetryBase time.Duration
	RetryMax  time.Duration
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
	if cfg.Sys.SignaturePolicyPath != "" {
		if err := checkPolicy(ctx, cfg); err != nil {
			return nil, err
		}
	}
	r := newRemote(cfg.Sys, cfg.Jobs, netlimit.Policy{Attempts: cfg.Attempts, Backoff: cfg.RetryBase, MaxWait: cfg.RetryMax})
	defer r.close()
	// Manifests first: they name the blobs.
	images, manifestsGot, err := pinAll(ctx, r, cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{images: images}
	rep := &res.Report
	rep.Images, rep.ManifestsGot = len(images), manifestsGot
	plan := planBlobs(images, cfg.Store, rep)
	cfg.Log.Info("precache plan", "images", rep.Images, "blobs", rep.Blobs, "to_fetch", len(plan.todo),
		"bytes_total", rep.BytesTotal, "bytes_reused", rep.BytesReused)
	err = plan.fetch(ctx, r, cfg, rep)
	rep.Retries = r.retries.Load()
	rep.Seconds = time.Since(start).Seconds()
	return res, err
}

// pinAll pins every image's manifests in parallel and returns them with the number of
// manifests fetched from a registry (a stored manifest costs no request).
func pinAll(ctx context.Context, r *remote, cfg Config) ([]*pinnedImage, int, error) {
	images := make([]*pinnedImage, len(cfg.Images))
	var got atomic.Int64
	err := parallel(ctx, cfg.Jobs, len(cfg.Images), func(ctx context.Context, i int) error {
		pi, n, err := pinManifests(ctx, r, cfg, cfg.Images[i])
		images[i] = pi
		got.Add(int64(n))
		return err
	})
	return images, int(got.Load()), err
}

// plannedBlob is one unique blob of a run, fetched from the first image naming it.
type plannedBlob struct {
	desc  descriptor
	ref   reference.Named
	users []int // indexes of the images naming it
}

// blobPlan is the blobs a run must fetch, and how many blobs each image still waits for
// (an image is done, for progress, when its last blob is).
type blobPlan struct {
	todo       []*plannedBlob
	remaining  []atomic.Int64
	imagesDone atomic.Int64
}

// planBlobs lists the unique blobs of images, counts them and the stored ones in rep with the
// per-image report, and returns those still to fetch, largest first so the long transfers
// overlap with the many small ones.
func planBlobs(images []*pinnedImage, st *blobstore.Store, rep *Report) *blobPlan {
	byDigest := map[digest.Digest]*plannedBlob{}
	var order []*plannedBlob
	for i, im := range images {
		rep.Manifests += len(im.manifests)
		ir := ImageReport{Name: im.Name, Ref: im.Ref, Digest: im.Digest, Instance: im.instance.String(), Blobs: len(im.blobs)}
		for _, d := range im.blobs {
			ir.Bytes += d.Size
			b, ok := byDigest[d.Digest]
			if !ok {
				b = &plannedBlob{desc: d, ref: im.named}
				byDigest[d.Digest] = b
				order = append(order, b)
			}
			b.users = append(b.users, i)
		}
		rep.List = append(rep.List, ir)
	}
	p := &blobPlan{remaining: make([]atomic.Int64, len(images))}
	for _, b := range order {
		for _, u := range b.users {
			p.remaining[u].Add(1)
		}
	}
	for i := range images {
		if p.remaining[i].Load() == 0 {
			p.imagesDone.Add(1)
		}
	}
	for _, b := range order {
		rep.Blobs++
		rep.BytesTotal += b.desc.Size
		if st.Has(b.desc.Digest, b.desc.Size) {
			rep.BlobsReused++
			rep.BytesReused += b.desc.Size
			p.finish(b)
			continue
		}
		p.todo = append(p.todo, b)
	}
	sort.SliceStable(p.todo, func(i, j int) bool { return p.todo[i].desc.Size > p.todo[j].desc.Size })
	return p
}

// finish counts blob b as in the store for every image naming it.
func (p *blobPlan) finish(b *plannedBlob) {
	for _, u := range b.users {
		if p.remaining[u].Add(-1) == 0 {
			p.imagesDone.Add(1)
		}
	}
}

// fetch downloads the planned blobs in parallel, reporting progress every half second, and
// completes rep's byte and blob counts.
func (p *blobPlan) fetch(ctx context.Context, r *remote, cfg Config, rep *Report) error {
	var done, received, fetchedBlobs, fetchedBytes atomic.Int64
	done.Store(rep.BytesReused)
	progress := func() {
		cfg.Progress("images", p.imagesDone.Load(), int64(rep.Images), "images")
		cfg.Progress("bytes", min(done.Load(), rep.BytesTotal), rep.BytesTotal, "bytes")
	}
	progress()
	stop := every(500*time.Millisecond, progress)
	err := parallel(ctx, cfg.Jobs, len(p.todo), func(ctx context.Context, i int) error {
		b := p.todo[i]
		var counted int64
		n, err := r.fetchBlob(ctx, cfg.Store, b.ref, b.desc.Digest, b.desc.Size, func(k int64) {
			counted += k
			done.Add(k)
		})
		received.Add(n)
		if err != nil {
			return err
		}
		// Count the blob as done by its size, whatever the retries cost.
		done.Add(b.desc.Size - counted)
		if n > 0 {
			fetchedBlobs.Add(1)
			fetchedBytes.Add(b.desc.Size)
		}
		p.finish(b)
		return nil
	})
	stop()
	rep.BytesFetched = received.Load()
	if err != nil {
		return err
	}
	// Blobs another build finished while we waited for its lock count as reused.
	rep.BlobsFetched = int(fetchedBlobs.Load())
	rep.BlobsReused = rep.Blobs - rep.BlobsFetched
	rep.BytesReused = rep.BytesTotal - fetchedBytes.Load()
	progress()
	return nil
}

// every calls fn every d until the returned stop is called; stop waits for a running call.
func every(d time.Duration, fn func()) (stop func()) {
	tick := time.NewTicker(d)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-tick.C:
				fn()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		tick.Stop()
		close(quit)
		wg.Wait()
	}
}

func (cfg *Config) defaults() {
	if cfg.Jobs <= 0 {
		cfg.Jobs = 6
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
	load := func(d digest.Digest) (*manifestDoc, error) {
		m, desc, fetched, err := loadManifest(ctx, r, cfg.Store, img, named, d)
		if fetched {
			got++
		}
		if err == nil {
			pi.manifests = append(pi.manifests, desc)
		}
		return m, err
	}
	m, err := load(d)
	if err != nil {
		return nil, got, err
	}
	if len(m.Manifests) > 0 {
		inst, err := choose(m.Manifests, cfg.Arch, cfg.OS)
		if err != nil {
			return nil, got, fmt.Errorf("image %s: %w", img.Ref, err)
		}
		if m, err = load(inst.Digest); err != nil {
			return nil, got, err
		}
		pi.instance = inst.Digest
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

// loadManifest reads manifest d of img from the store, fetching and storing it first if the
// store lacks it (fetched says so), and returns it with its descriptor. The media type comes
// from the manifest itself, never from a response header, so a layout made from the store is
// the same as one made from the registry.
func loadManifest(ctx context.Context, r *remote, st *blobstore.Store, img Image, named reference.Named, d digest.Digest) (m *manifestDoc, desc descriptor, fetched bool, err error) {
	b, err := st.Read(d)
	if err != nil {
		if b, _, err = r.fetchManifest(ctx, named, d); err != nil {
			return nil, desc, false, err
		}
		if err := st.Put(d, b); err != nil {
			return nil, desc, false, err
		}
		fetched = true
	} else if d.Algorithm().FromBytes(b) != d {
		return nil, desc, false, fmt.Errorf("stored manifest %s is corrupt: remove %s", d, st.Path(d))
	}
	m = &manifestDoc{}
	if err := strictjson.DecodeOpen(b, m); err != nil {
		return nil, desc, fetched, fmt.Errorf("manifest %s of %s: %w", d, img.Ref, err)
	}
	if m.SchemaVersion != 2 {
		return nil, desc, fetched, fmt.Errorf("manifest %s of %s: schema version %d is not supported", d, img.Ref, m.SchemaVersion)
	}
	mt := m.MediaType
	if mt == "" {
		mt = guessMediaType(m)
	}
	return m, descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}, fetched, nil
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
