package resolve

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"github.com/snofactory/snofactory/stages/internal/lockfile"

	ciimage "github.com/containers/image/v5/image"
)

// CatalogOperator is a day-2 operator named by its package in a catalog (index) image.
type CatalogOperator struct {
	// Package is the operator package name (ptp-operator).
	Package string `json:"package"`
	// Channel is the channel to follow; "" means the package's default channel.
	Channel string `json:"channel,omitempty"`
	// Catalog is the catalog image (tag or digest).
	Catalog string `json:"catalog"`
}

// configsLabel names the directory of a catalog image's file-based catalog.
const configsLabel = "operators.operatorframework.io.index.configs.v1"

// defaultConfigsDir is where catalogs without the label keep their file-based catalog.
const defaultConfigsDir = "/configs"

// maxListed bounds how many packages or channels an error message lists.
const maxListed = 30

// resolveCatalogs pins, for each operator, the head bundle of its channel and the bundle's
// related images. Each catalog image is read once however many operators name it.
func (c *client) resolveCatalogs(ctx context.Context, ops []CatalogOperator, log *slog.Logger) ([]lockfile.LockedImage, error) {
	var order []string
	byCatalog := map[string][]CatalogOperator{}
	named := map[string]string{} // package -> catalog
	for _, op := range ops {
		if op.Package == "" || op.Catalog == "" {
			return nil, fmt.Errorf("catalog operator %+v: package and catalog are both required", op)
		}
		// A cluster subscribes to a package once, and the lock tells operators apart by package.
		if prev, ok := named[op.Package]; ok {
			return nil, fmt.Errorf("operator %s is named twice (catalogs %s and %s)", op.Package, prev, op.Catalog)
		}
		named[op.Package] = op.Catalog
		if _, ok := byCatalog[op.Catalog]; !ok {
			order = append(order, op.Catalog)
		}
		byCatalog[op.Catalog] = append(byCatalog[op.Catalog], op)
	}
	var out []lockfile.LockedImage
	for _, ref := range order {
		want := map[string]bool{}
		for _, op := range byCatalog[ref] {
			want[op.Package] = true
		}
		cat, err := c.readCatalog(ctx, ref, want)
		if err != nil {
			return nil, err
		}
		log.Info("read operator catalog", "catalog", ref, "digest", cat.digest, "packages", len(cat.packages))
		for _, op := range byCatalog[ref] {
			b, channel, err := cat.head(op)
			if err != nil {
				return nil, err
			}
			imgs, err := c.pinBundle(ctx, op, b)
			if err != nil {
				return nil, err
			}
			log.Info("resolved catalog operator", "package", op.Package, "channel", channel, "bundle", b.Name, "images", len(imgs))
			out = append(out, imgs...)
		}
	}
	return out, nil
}

// readCatalog opens a catalog image and parses the file-based catalog its label points at.
// Only the packages in want keep their channels and bundles.
func (c *client) readCatalog(ctx context.Context, ref string, want map[string]bool) (*catalog, error) {
	im, err := c.open(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("operator catalog: %w", err)
	}
	defer im.Close()
	labels, err := c.labels(ctx, im)
	if err != nil {
		return nil, fmt.Errorf("operator catalog %s: %w", ref, err)
	}
	dir := labels[configsLabel]
	if dir == "" {
		dir = defaultConfigsDir
	}
	dir = strings.TrimPrefix(path.Clean("/"+dir), "/")
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	// Files are decoded as each layer streams by. A layer's whiteouts remove what lower
	// layers gave, its files replace theirs; a layer read again after a transfer failure
	// starts over.
	files := map[string]fbcFile{}
	ignores := map[string][]byte{}
	for _, l := range im.manifest.LayerInfos() {
		var layer catalogLayer
		err := retry(ctx, func() error {
			layer = catalogLayer{files: map[string]fbcFile{}, ignores: map[string][]byte{}}
			return c.walkLayer(ctx, im, l.BlobInfo, func(name string, _ *tar.Header, r io.Reader) error {
				return layer.add(name, prefix, r, want)
			})
		})
		if err != nil {
			return nil, fmt.Errorf("operator catalog %s: reading layer %s: %w", ref, l.Digest, err)
		}
		for _, gone := range layer.removed {
			dropWithin(files, prefix, gone)
			dropWithin(ignores, prefix, gone)
		}
		maps.Copy(files, layer.files)
		maps.Copy(ignores, layer.ignores)
	}
	cat, err := assembleCatalog(files, readIgnoreRules(ignores))
	if err != nil {
		return nil, fmt.Errorf("operator catalog %s (file-based catalog in /%s): %w", ref, dir, err)
	}
	if len(cat.packages) == 0 {
		return nil, fmt.Errorf("operator catalog %s has no file-based catalog in /%s (label %s): an index image of the older SQLite kind cannot be read", ref, dir, configsLabel)
	}
	cat.ref, cat.digest = ref, im.digest.String()
	return cat, nil
}

// catalogLayer is what one layer of a catalog image adds and removes.
type catalogLayer struct {
	files   map[string]fbcFile
	ignores map[string][]byte
	// removed are paths (in the image) whose lower-layer content is gone: whiteouts name
	// a file or directory, opaque whiteouts a directory's content ("" for all).
	removed []string
}

// add takes one file of the layer: a whiteout, an .indexignore or a catalog file below
// prefix (the catalog directory).
func (l *catalogLayer) add(name, prefix string, r io.Reader, want map[string]bool) error {
	dir, base := path.Split(name)
	if base == ".wh..wh..opq" {
		l.removed = append(l.removed, strings.TrimSuffix(dir, "/"))
		return nil
	}
	if gone, ok := strings.CutPrefix(base, ".wh."); ok {
		l.removed = append(l.removed, dir+gone)
		return nil
	}
	rel, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return nil
	}
	er := &readErrs{r: r}
	if base == indexIgnore {
		b, err := io.ReadAll(io.LimitReader(er, 1<<20))
		if err != nil {
			return err
		}
		l.ignores[rel] = b
		return nil
	}
	objs, err := decodeObjects(rel, er, func(pkg string) bool { return want[pkg] })
	if er.err != nil {
		return er.err // the transfer failed, not the file: the layer is read again
	}
	l.files[rel] = fbcFile{objs: objs, err: err}
	return nil
}

// dropWithin deletes the entries (paths relative to prefix) at or below gone.
func dropWithin[V any](m map[string]V, prefix, gone string) {
	for k := range m {
		if within(prefix+k, gone) {
			delete(m, k)
		}
	}
}

// within reports whether name is dir or below it ("" holds everything).
func within(name, dir string) bool {
	return dir == "" || name == dir || strings.HasPrefix(name, dir+"/")
}

// readErrs passes a reader through and keeps the first error other than EOF it returned.
type readErrs struct {
	r   io.Reader
	err error
}

func (e *readErrs) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// labels returns the image's config labels.
func (c *client) labels(ctx context.Context, im *image) (map[string]string, error) {
	var labels map[string]string
	err := retry(ctx, func() error {
		ctx, w := watch(ctx, im.named, "image config")
		defer w.Stop()
		img, err := ciimage.FromUnparsedImage(ctx, c.sys, ciimage.UnparsedInstance(im.src, &im.instance))
		if err != nil {
			return w.Err(err)
		}
		info, err := img.Inspect(ctx)
		if err != nil {
			return w.Err(err)
		}
		labels = info.Labels
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	return labels, nil
}

// head picks the operator's channel (the default channel unless named) and its head bundle.
func (cat *catalog) head(op CatalogOperator) (*fbcBundle, string, error) {
	pkg, ok := cat.packages[op.Package]
	if !ok {
		names := slices.Sorted(maps.Keys(cat.packages))
		return nil, "", fmt.Errorf("operator %s: catalog %s has no package %q%s; it has %s",
			op.Package, op.Catalog, op.Package, didYouMean(op.Package, names), listNames(names))
	}
	channels := slices.Sorted(maps.Keys(pkg.channels))
	name := op.Channel
	if name == "" {
		name = pkg.defaultChannel
		if name == "" {
			return nil, "", fmt.Errorf("operator %s in catalog %s: the package names no default channel; name one of its channels: %s",
				op.Package, op.Catalog, listNames(channels))
		}
	}
	ch, ok := pkg.channels[name]
	if !ok {
		what := "has no channel"
		if op.Channel == "" {
			what = "names a default channel it does not have,"
		}
		return nil, "", fmt.Errorf("operator %s: package %s in catalog %s %s %q%s; its channels: %s",
			op.Package, op.Package, op.Catalog, what, name, didYouMean(name, channels), listNames(channels))
	}
	head, err := ch.head()
	if err != nil {
		return nil, "", fmt.Errorf("operator %s: channel %s of package %s in catalog %s: %w", op.Package, name, op.Package, op.Catalog, err)
	}
	b, ok := pkg.bundles[head]
	if !ok {
		return nil, "", fmt.Errorf("operator %s: channel %s of package %s in catalog %s: head %s has no olm.bundle", op.Package, name, op.Package, op.Catalog, head)
	}
	if b.Image == "" {
		return nil, "", fmt.Errorf("operator %s: bundle %s (channel %s of package %s in catalog %s) names no image", op.Package, head, name, op.Package, op.Catalog)
	}
	return b, name, nil
}

// head returns the entry no other entry replaces or skips (skipRange does not count, as
// in OLM), refusing channels with no head or several.
func (ch *fbcChannel) head() (string, error) {
	if len(ch.Entries) == 0 {
		return "", fmt.Errorf("the channel has no entries")
	}
	superseded := map[string]bool{}
	for _, e := range ch.Entries {
		if e.Replaces != "" {
			superseded[e.Replaces] = true
		}
		for _, s := range e.Skips {
			superseded[s] = true
		}
	}
	var heads []string
	for _, e := range ch.Entries {
		if !superseded[e.Name] {
			heads = append(heads, e.Name)
		}
	}
	switch len(heads) {
	case 1:
		return heads[0], nil
	case 0:
		return "", fmt.Errorf("no head: every entry is replaced or skipped by another (a cycle)")
	default:
		sort.Strings(heads)
		return "", fmt.Errorf("%d heads (%s): no single entry replaces or skips all the others", len(heads), strings.Join(heads, ", "))
	}
}

// pinBundle pins a bundle image and its related images by digest.
func (c *client) pinBundle(ctx context.Context, op CatalogOperator, b *fbcBundle) ([]lockfile.LockedImage, error) {
	source := lockfile.SourceOperator + ":" + op.Package
	pinned, dg, err := c.digestOf(ctx, b.Image)
	if err != nil {
		return nil, fmt.Errorf("operator %s: bundle %s: %w", op.Package, b.Name, err)
	}
	out := []lockfile.LockedImage{{Name: "bundle", Ref: pinned, Digest: dg.String(), Source: source}}
	seen := map[string]bool{b.Image: true}
	names := map[string]bool{"bundle": true}
	for _, r := range b.RelatedImages {
		if r.Image == "" || seen[r.Image] {
			continue
		}
		seen[r.Image] = true
		pinned, dg, err := c.digestOf(ctx, r.Image)
		if err != nil {
			return nil, fmt.Errorf("operator %s: bundle %s: related image %s: %w", op.Package, b.Name, r.Image, err)
		}
		// The lock tells images of one source apart by name.
		name := r.Name
		if name == "" || names[name] {
			name = r.Image
		}
		names[name] = true
		out = append(out, lockfile.LockedImage{Name: name, Ref: pinned, Digest: dg.String(), Source: source})
	}
	return out, nil
}

// listNames joins names for an error message, shortening long lists.
func listNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to word, or "" when
// none is a plausible slip.
func didYouMean(word string, candidates []string) string {
	if s := suggest.Closest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}
