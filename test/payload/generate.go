package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Component is one component image as pushed.
type Component struct {
	Name string
	// Digest is the manifest digest (the index digest for multi-arch).
	Digest    string
	MediaType types.MediaType
	// Reference is the pull spec written in image-references
	// (ReferenceRegistry/ComponentRepo@Digest).
	Reference string
	// PullSpec is the same image in the registry it was pushed to.
	PullSpec string
	// Layers are the linux/amd64 image's layer digests, bottom first.
	Layers []string
	// Bytes is the linux/amd64 image's config plus layer sizes.
	Bytes int64
	// Platforms is set for a multi-arch index ("linux/amd64", ...).
	Platforms []string
}

// Release is a generated payload.
type Release struct {
	Version string
	// Digest is the release manifest digest; PullSpec is
	// REGISTRY/ReleaseRepo@Digest and Tag REGISTRY/ReleaseRepo:VERSION-x86_64.
	Digest   string
	PullSpec string
	Tag      string
	// Registry is where the payload was pushed; ReferenceRegistry is the
	// host image-references names.
	Registry          string
	ReferenceRegistry string
	ComponentRepo     string
	Components        []Component

	// The release-manifests files, byte for byte as in the release image.
	ImageReferences []byte
	ReleaseMetadata []byte
	BootImages      []byte // nil with Options.ISO.NoBootImages
	// ISO is the boot ISO as the stream metadata names it.
	ISOLocation string
	ISOSHA256   string

	// UniqueBlobBytes counts every distinct blob (layers and configs of
	// the release and all components) once; TotalBlobBytes counts them per
	// image, as a client without deduplication would fetch them.
	UniqueBlobBytes int64
	TotalBlobBytes  int64
	UniqueBlobs     int
	// Elapsed is how long generation and pushing took.
	Elapsed time.Duration
}

// Component returns the named component.
func (r *Release) Component(name string) (Component, bool) {
	for _, c := range r.Components {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// LayerUse maps each layer digest to the number of component images
// (linux/amd64) that contain it.
func (r *Release) LayerUse() map[string]int {
	use := map[string]int{}
	for _, c := range r.Components {
		for _, l := range c.Layers {
			use[l]++
		}
	}
	return use
}

// isoContent is the resolved boot ISO.
type isoContent struct {
	location   string
	sha256     string
	data       []byte // nil unless Options.ISO.Path
	streamJSON []byte
}

func resolveISO(o *Options) (*isoContent, error) {
	c := &isoContent{location: o.ISO.Location, sha256: strings.ToLower(o.ISO.SHA256)}
	if o.ISO.Path != "" {
		data, err := os.ReadFile(o.ISO.Path)
		if err != nil {
			return nil, fmt.Errorf("payload: read ISO: %w", err)
		}
		sum := sha256.Sum256(data)
		got := hex.EncodeToString(sum[:])
		if c.sha256 != "" && c.sha256 != got {
			return nil, fmt.Errorf("payload: ISO %s has sha256 %s, options say %s", o.ISO.Path, got, c.sha256)
		}
		c.sha256, c.data = got, data
		if c.location == "" {
			abs, err := filepath.Abs(o.ISO.Path)
			if err != nil {
				return nil, fmt.Errorf("payload: ISO path: %w", err)
			}
			c.location = abs
		}
	}
	if c.location == "" {
		// Nothing lives here; tests that never fetch the ISO need no file.
		c.location = "https://rhcos.mirror.invalid/synthetic/rhcos-" + o.ISO.Release + "-live.x86_64.iso"
	}
	if c.sha256 == "" {
		sum := sha256.Sum256([]byte("snofactory synthetic placeholder ISO " + o.ISO.Release))
		c.sha256 = hex.EncodeToString(sum[:])
	}
	if len(c.sha256) != 64 {
		return nil, fmt.Errorf("payload: ISO sha256 %q is not 64 hex digits", c.sha256)
	}
	js, err := json.MarshalIndent(streamFor(o, c.location, c.sha256), "", "  ")
	if err != nil {
		return nil, err
	}
	c.streamJSON = js
	return c, nil
}

// image is a built manifest with its blobs.
type image struct {
	manifest  []byte
	mediaType types.MediaType
	digest    v1.Hash
	config    *blob
	layers    []*blob
}

func (i *image) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *image) MediaType() (types.MediaType, error) { return i.mediaType, nil }
func (i *image) bytes() int64 {
	n := int64(len(i.config.data))
	for _, l := range i.layers {
		n += int64(len(l.data))
	}
	return n
}

// buildImage writes a config and a manifest over layers.
func buildImage(arch string, oci bool, layers []*blob, history []string, cfg v1.Config) (*image, error) {
	mt, cmt, lmt := manifestTypes(oci)
	cf := v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	}
	for i, l := range layers {
		cf.RootFS.DiffIDs = append(cf.RootFS.DiffIDs, l.diffID)
		cf.History = append(cf.History, v1.History{Created: v1.Time{Time: epoch}, CreatedBy: history[i]})
	}
	cj, err := json.Marshal(cf)
	if err != nil {
		return nil, fmt.Errorf("payload: config: %w", err)
	}
	config := &blob{data: cj, digest: sha(cj), diffID: sha(cj), mediaType: cmt}
	m := v1.Manifest{SchemaVersion: 2, MediaType: mt, Config: config.descriptor(cmt)}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.descriptor(lmt))
	}
	mj, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("payload: manifest: %w", err)
	}
	return &image{manifest: mj, mediaType: mt, digest: sha(mj), config: config, layers: layers}, nil
}

// index is a built manifest list over images.
type index struct {
	manifest  []byte
	mediaType types.MediaType
	digest    v1.Hash
	images    []*image
	platforms []string
}

func (i *index) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *index) MediaType() (types.MediaType, error) { return i.mediaType, nil }

func buildIndex(oci bool, imgs []*image, archs []string) (*index, error) {
	mt := types.DockerManifestList
	if oci {
		mt = types.OCIImageIndex
	}
	im := v1.IndexManifest{SchemaVersion: 2, MediaType: mt}
	var plats []string
	for i, img := range imgs {
		im.Manifests = append(im.Manifests, v1.Descriptor{
			MediaType: img.mediaType, Size: int64(len(img.manifest)), Digest: img.digest,
			Platform: &v1.Platform{OS: "linux", Architecture: archs[i]},
		})
		plats = append(plats, "linux/"+archs[i])
	}
	j, err := json.Marshal(im)
	if err != nil {
		return nil, fmt.Errorf("payload: index: %w", err)
	}
	return &index{manifest: j, mediaType: mt, digest: sha(j), images: imgs, platforms: plats}, nil
}

// Generate builds a payload from opts and pushes it to the registry at
// registryAddr ("host:port"). Components go to ComponentRepo by digest, the
// release image to ReleaseRepo under the tag VERSION-x86_64.
func Generate(ctx context.Context, registryAddr string, opts Options) (*Release, error) {
	start := time.Now()
	g, err := newGeneration(ctx, registryAddr, opts)
	if err != nil {
		return nil, err
	}
	plans := plan(&g.o)
	byKey, err := g.buildLayers(ctx, plans)
	if err != nil {
		return nil, err
	}
	g.log.Info("payload layers built", "layers", len(byKey), "elapsed", time.Since(start).Round(time.Millisecond))

	rel := &Release{Version: g.o.Version, Registry: registryAddr, ReferenceRegistry: g.refReg, ComponentRepo: g.o.ComponentRepo}
	set, err := g.buildComponents(rel, plans, byKey)
	if err != nil {
		return nil, err
	}
	// The release image is the CVO image plus the release-manifests layer.
	relImg, err := releaseImage(&g.o, rel, set.cvo, g.iso)
	if err != nil {
		return nil, err
	}
	if err := g.push(ctx, rel, set, relImg); err != nil {
		return nil, err
	}

	rel.Digest = relImg.digest.String()
	rel.PullSpec = fmt.Sprintf("%s/%s@%s", registryAddr, g.o.ReleaseRepo, rel.Digest)
	rel.Tag = g.relTag.String()
	rel.ISOLocation, rel.ISOSHA256 = g.iso.location, g.iso.sha256
	countBlobs(rel, append(set.images, relImg))
	rel.Elapsed = time.Since(start)
	g.log.Info("payload pushed", "release", rel.PullSpec, "components", len(rel.Components),
		"unique_blob_bytes", rel.UniqueBlobBytes, "elapsed", rel.Elapsed.Round(time.Millisecond))
	return rel, nil
}

// generation is one Generate call: its options with defaults applied, and
// where and how it pushes.
type generation struct {
	o        Options
	log      *slog.Logger
	sizes    layerSizes
	iso      *isoContent
	registry string // where the payload is pushed
	refReg   string // the registry host image-references names
	compRepo name.Repository
	relTag   name.Tag
	ropts    []remote.Option
}

func newGeneration(ctx context.Context, registryAddr string, opts Options) (*generation, error) {
	g := &generation{o: opts, registry: registryAddr, refReg: opts.ReferenceRegistry, log: opts.Logger}
	o := &g.o
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.sizes, _ = o.Size.layers() // defaults checked the size
	var err error
	if g.iso, err = resolveISO(o); err != nil {
		return nil, err
	}
	if g.refReg == "" {
		g.refReg = registryAddr
	}
	if g.compRepo, err = name.NewRepository(registryAddr + "/" + o.ComponentRepo); err != nil {
		return nil, fmt.Errorf("payload: component repository: %w", err)
	}
	if g.relTag, err = name.NewTag(fmt.Sprintf("%s/%s:%s-x86_64", registryAddr, o.ReleaseRepo, o.Version)); err != nil {
		return nil, fmt.Errorf("payload: release tag: %w", err)
	}
	g.ropts = remoteOptions(ctx, o.Transport, o.Auth, remote.WithJobs(1))
	return g, nil
}

// remoteOptions are the options every push uses: ctx, and the transport and
// credentials when set.
func remoteOptions(ctx context.Context, t http.RoundTripper, auth authn.Authenticator, more ...remote.Option) []remote.Option {
	ropts := append([]remote.Option{remote.WithContext(ctx)}, more...)
	if t != nil {
		ropts = append(ropts, remote.WithTransport(t))
	}
	if auth != nil {
		ropts = append(ropts, remote.WithAuth(auth))
	}
	return ropts
}

// buildLayers builds every distinct layer the plans name once, in parallel
// (gzip is the cost), and returns them by key.
func (g *generation) buildLayers(ctx context.Context, plans []componentPlan) (map[string]*blob, error) {
	var keys []string
	seen := map[string]bool{}
	for _, p := range plans {
		for _, k := range append(append([]string(nil), p.Layers...), p.ARMLayers...) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	layers := make([]*blob, len(keys))
	err := parallel(ctx, g.o.Jobs, len(keys), func(i int) error {
		files, err := layerFiles(&g.o, keys[i], g.sizes, g.iso)
		if err != nil {
			return err
		}
		b, err := buildLayer(files)
		if err != nil {
			return fmt.Errorf("payload: layer %s: %w", keys[i], err)
		}
		layers[i] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	byKey := map[string]*blob{}
	for i, k := range keys {
		byKey[k] = layers[i]
	}
	return byKey, nil
}

// componentSet is what building the component images made.
type componentSet struct {
	images  []*image                   // every image manifest, arm64 ones included
	indexes []*index                   // the multi-arch indexes, pushed after the images they list
	tops    map[string]remote.Taggable // what each component's digest names
	cvo     *image
}

// buildComponents builds every planned component image (an index over two
// platforms for multi-arch ones) and adds each to rel.Components.
func (g *generation) buildComponents(rel *Release, plans []componentPlan, byKey map[string]*blob) (*componentSet, error) {
	set := &componentSet{tops: map[string]remote.Taggable{}}
	for _, p := range plans {
		img, err := componentImage(&g.o, p, p.Layers, "amd64", byKey)
		if err != nil {
			return nil, err
		}
		c := Component{Name: p.Name, Digest: img.digest.String(), MediaType: img.mediaType, Bytes: img.bytes()}
		for _, l := range img.layers {
			c.Layers = append(c.Layers, l.digest.String())
		}
		set.images = append(set.images, img)
		set.tops[p.Name] = img
		if p.MultiArch {
			arm, err := componentImage(&g.o, p, p.ARMLayers, "arm64", byKey)
			if err != nil {
				return nil, err
			}
			idx, err := buildIndex(p.OCI, []*image{img, arm}, []string{"amd64", "arm64"})
			if err != nil {
				return nil, err
			}
			set.images = append(set.images, arm)
			set.indexes = append(set.indexes, idx)
			set.tops[p.Name] = idx
			c.Digest, c.MediaType, c.Platforms = idx.digest.String(), idx.mediaType, idx.platforms
		}
		c.Reference = fmt.Sprintf("%s/%s@%s", g.refReg, g.o.ComponentRepo, c.Digest)
		c.PullSpec = fmt.Sprintf("%s/%s@%s", g.registry, g.o.ComponentRepo, c.Digest)
		rel.Components = append(rel.Components, c)
		if p.Name == NameCVO {
			set.cvo = img
		}
	}
	return set, nil
}

// push pushes component blobs, component manifests (indexes last, after the
// images they list), the component tags, then the release.
func (g *generation) push(ctx context.Context, rel *Release, set *componentSet, relImg *image) error {
	jobs, repo, ropts := g.o.Jobs, g.compRepo, g.ropts
	if err := pushBlobs(ctx, jobs, repo, set.images, ropts); err != nil {
		return err
	}
	err := parallel(ctx, jobs, len(set.images), func(i int) error {
		return putManifest(repo.Digest(set.images[i].digest.String()), set.images[i], ropts)
	})
	if err != nil {
		return err
	}
	for _, idx := range set.indexes {
		if err := putManifest(repo.Digest(idx.digest.String()), idx, ropts); err != nil {
			return err
		}
	}
	// Tag each component VERSION-NAME, as `oc adm release mirror` does, so
	// the repository has a tag list like a mirrored one.
	err = parallel(ctx, jobs, len(rel.Components), func(i int) error {
		c := rel.Components[i]
		return putManifest(repo.Tag(g.o.Version+"-"+c.Name), set.tops[c.Name], ropts)
	})
	if err != nil {
		return err
	}
	if err := pushBlobs(ctx, jobs, g.relTag.Repository, []*image{relImg}, ropts); err != nil {
		return err
	}
	return putManifest(g.relTag, relImg, ropts)
}

// countBlobs sets rel's blob totals over imgs: each distinct blob once, and
// each blob once per image that holds it.
func countBlobs(rel *Release, imgs []*image) {
	unique := map[v1.Hash]int64{}
	for _, img := range imgs {
		for _, b := range append([]*blob{img.config}, img.layers...) {
			unique[b.digest] = int64(len(b.data))
			rel.TotalBlobBytes += int64(len(b.data))
		}
	}
	for _, n := range unique {
		rel.UniqueBlobBytes += n
	}
	rel.UniqueBlobs = len(unique)
}

func componentImage(o *Options, p componentPlan, keys []string, arch string, byKey map[string]*blob) (*image, error) {
	var ls []*blob
	var hist []string
	for _, k := range keys {
		ls = append(ls, byKey[k])
		hist = append(hist, "/bin/sh -c #(nop) ADD layer "+k)
	}
	labels := map[string]string{
		"io.openshift.build.commit.id":       commitID(o, p.Name),
		"io.openshift.build.source-location": "https://github.com/openshift/" + p.Name,
		"io.openshift.release.component":     p.Name,
		"name":                               "openshift/ose-" + p.Name,
		"vendor":                             "snofactory synthetic test payload",
		"version":                            o.Version,
	}
	if strings.HasSuffix(p.Name, "-operator") || p.Name == NameCVO {
		labels["io.openshift.release.operator"] = "true"
	}
	cfg := v1.Config{
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container=oci"},
		Entrypoint: []string{"/usr/bin/" + p.Name},
		Labels:     labels,
	}
	switch p.Name {
	case NameInstaller:
		cfg.Entrypoint = []string{"/usr/bin/openshift-install"}
	case NameMachineOSImages:
		cfg.Entrypoint = nil
	}
	return buildImage(arch, p.OCI, ls, hist, cfg)
}

// commitID is a made-up, stable source commit for a component.
func commitID(o *Options, name string) string {
	r := rngFor(o.Seed, "commit/"+name)
	return fmt.Sprintf("%016x%016x%08x", r.Uint64(), r.Uint64(), r.Uint32())
}

func releaseImage(o *Options, rel *Release, cvo *image, iso *isoContent) (*image, error) {
	is := ImageStream{
		Kind:       "ImageStream",
		APIVersion: "image.openshift.io/v1",
		Metadata: ObjectMeta{
			Name:              o.Version,
			CreationTimestamp: epoch.Format(time.RFC3339),
			Annotations: map[string]string{
				"release.openshift.io/from-image-stream": "synthetic/" + o.Version,
			},
		},
	}
	comps := append([]Component(nil), rel.Components...)
	sort.Slice(comps, func(i, j int) bool { return comps[i].Name < comps[j].Name })
	for _, c := range comps {
		gen := int64(2)
		t := TagReference{
			Name: c.Name,
			Annotations: map[string]string{
				"io.openshift.build.commit.id":       commitID(o, c.Name),
				"io.openshift.build.commit.ref":      "",
				"io.openshift.build.source-location": "https://github.com/openshift/" + c.Name,
			},
			From:       &ObjectReference{Kind: "DockerImage", Name: c.Reference},
			Generation: &gen,
		}
		t.ReferencePolicy.Type = "Source"
		is.Spec.Tags = append(is.Spec.Tags, t)
	}
	var err error
	if rel.ImageReferences, err = json.MarshalIndent(is, "", "  "); err != nil {
		return nil, err
	}
	md := CincinnatiMetadata{Kind: "cincinnati-metadata-v0", Version: o.Version, Previous: o.Previous,
		Metadata: map[string]string{"description": "snofactory synthetic test payload", "url": "https://snofactory.invalid/releases/" + o.Version}}
	if rel.ReleaseMetadata, err = json.MarshalIndent(md, "", "  "); err != nil {
		return nil, err
	}
	var stream Stream
	if err := json.Unmarshal(iso.streamJSON, &stream); err != nil {
		return nil, err
	}
	if rel.BootImages, err = bootImagesYAML(o.Version, stream); err != nil {
		return nil, err
	}
	files := []file{
		{Name: "release-manifests/image-references", Mode: 0o644, Data: rel.ImageReferences},
		{Name: "release-manifests/release-metadata", Mode: 0o644, Data: rel.ReleaseMetadata},
	}
	if !o.ISO.NoBootImages {
		files = append(files, file{Name: "release-manifests/" + BootImagesManifest, Mode: 0o644, Data: rel.BootImages})
	} else {
		rel.BootImages = nil
	}
	layer, err := buildLayer(files)
	if err != nil {
		return nil, fmt.Errorf("payload: release layer: %w", err)
	}
	var cvoCfg v1.ConfigFile
	if err := json.Unmarshal(cvo.config.data, &cvoCfg); err != nil {
		return nil, err
	}
	cfg := cvoCfg.Config
	cfg.Labels = map[string]string{}
	for k, v := range cvoCfg.Config.Labels {
		cfg.Labels[k] = v
	}
	cfg.Labels["io.openshift.release"] = o.Version
	cfg.Labels["io.openshift.release.base-image-digest"] = cvo.digest.String()
	ls := append(append([]*blob(nil), cvo.layers...), layer)
	var hist []string
	for _, h := range cvoCfg.History {
		hist = append(hist, h.CreatedBy)
	}
	hist = append(hist, "/bin/sh -c #(nop) ADD dir:release-manifests in /release-manifests/")
	return buildImage("amd64", o.Format == OCI, ls, hist, cfg)
}

func pushBlobs(ctx context.Context, jobs int, repo name.Repository, imgs []*image, ropts []remote.Option) error {
	var bs []*blob
	seen := map[v1.Hash]bool{}
	for _, img := range imgs {
		for _, b := range append([]*blob{img.config}, img.layers...) {
			if !seen[b.digest] {
				seen[b.digest] = true
				bs = append(bs, b)
			}
		}
	}
	return parallel(ctx, jobs, len(bs), func(i int) error {
		if err := remote.WriteLayer(repo, bs[i], ropts...); err != nil {
			return fmt.Errorf("payload: push blob %s to %s: %w", bs[i].digest, repo, err)
		}
		return nil
	})
}

func putManifest(ref name.Reference, t remote.Taggable, ropts []remote.Option) error {
	if err := remote.Put(ref, t, ropts...); err != nil {
		return fmt.Errorf("payload: push manifest %s: %w", ref, err)
	}
	return nil
}

// parallel runs fn(0..n-1) on up to jobs goroutines and returns the first
// error; after an error or cancellation no new items start.
func parallel(ctx context.Context, jobs, n int, fn func(int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	for w := 0; w < min(jobs, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				if err := ctx.Err(); err != nil {
					first = err
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
