package payload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"gopkg.in/yaml.v3"
)

// CatalogConfigsLabel is the catalog image label naming its file-based catalog directory.
const CatalogConfigsLabel = "operators.operatorframework.io.index.configs.v1"

// CatalogLayout is how a package's part of the file-based catalog is written.
type CatalogLayout string

// Catalog layouts.
const (
	// LayoutJSON is one catalog.json holding a stream of JSON objects, as opm render writes.
	LayoutJSON CatalogLayout = "json"
	// LayoutYAML is one catalog.yaml of YAML documents separated by "---".
	LayoutYAML CatalogLayout = "yaml"
	// LayoutSplit spreads the package over files: package.yaml, channels/<name>.json and
	// bundles/<name>.yaml.
	LayoutSplit CatalogLayout = "split"
)

// CatalogOptions describe an operator catalog (index) image to generate.
type CatalogOptions struct {
	// Repo is the catalog repository. Default "redhat/redhat-operator-index".
	Repo string
	// Tag is the catalog tag. Default "v4.16".
	Tag string
	// ImagePrefix is the repository prefix of the bundle, operator and operand images.
	// Default "operators".
	ImagePrefix string
	// ConfigsDir is the catalog directory, written into the image label. Default "/configs".
	ConfigsDir string
	// NoLabel leaves the configs label out (readers then assume /configs).
	NoLabel bool
	// Packages are the catalog's packages. Default DefaultCatalogPackages().
	Packages []CatalogPackage
	// Transport and Auth reach the registry (e.g. TLS or htpasswd fixtures).
	Transport http.RoundTripper
	Auth      authn.Authenticator
}

// CatalogPackage is one operator package.
type CatalogPackage struct {
	Name           string
	DefaultChannel string
	Layout         CatalogLayout
	Channels       []CatalogChannel
}

// CatalogChannel is one upgrade channel; its entries name bundles, which are generated
// once per distinct name across the package's channels.
type CatalogChannel struct {
	Name    string
	Entries []CatalogEntry
}

// CatalogEntry is one channel entry: a bundle and the upgrade edges into it.
type CatalogEntry struct {
	Name      string
	Replaces  string
	Skips     []string
	SkipRange string
}

// Catalog is a generated catalog image.
type Catalog struct {
	// Ref is REGISTRY/Repo:Tag; PullSpec is REGISTRY/Repo@Digest.
	Ref      string
	PullSpec string
	Digest   string
	// ConfigsDir is where the file-based catalog lives in the image.
	ConfigsDir string
	// Files are the catalog files as written, by path relative to ConfigsDir.
	Files map[string][]byte
	// Bundles are the generated bundles by name.
	Bundles map[string]CatalogBundle
}

// CatalogBundle is a generated bundle and the images it relates.
type CatalogBundle struct {
	Name    string
	Package string
	Version string
	// Image is the bundle image by digest, as the catalog names it.
	Image  string
	Digest string
	// Related are the bundle's relatedImages other than the bundle itself.
	Related []CatalogRelated
}

// CatalogRelated is one related image: Image is the reference the catalog writes (the
// operator by digest, the operand by tag), Digest what it resolves to.
type CatalogRelated struct {
	Name   string
	Image  string
	Digest string
}

// DefaultCatalogPackages is a small catalog with every shape resolution meets: a default
// and a second channel, a replaces chain with a skipped entry, skipRange, YAML, JSON and
// split layouts, and a package whose channel has two heads.
func DefaultCatalogPackages() []CatalogPackage {
	return []CatalogPackage{
		{Name: "ptp-operator", DefaultChannel: "stable", Layout: LayoutJSON, Channels: []CatalogChannel{
			{Name: "stable", Entries: []CatalogEntry{
				{Name: "ptp-operator.v4.16.0"},
				{Name: "ptp-operator.v4.16.1", Replaces: "ptp-operator.v4.16.0"},
				{Name: "ptp-operator.v4.16.2", Replaces: "ptp-operator.v4.16.1"},
				{Name: "ptp-operator.v4.16.3", Replaces: "ptp-operator.v4.16.1", Skips: []string{"ptp-operator.v4.16.2"}},
			}},
			{Name: "4.15", Entries: []CatalogEntry{
				{Name: "ptp-operator.v4.15.0"},
				{Name: "ptp-operator.v4.15.1", Replaces: "ptp-operator.v4.15.0"},
			}},
		}},
		{Name: "sriov-network-operator", DefaultChannel: "stable", Layout: LayoutYAML, Channels: []CatalogChannel{
			{Name: "stable", Entries: []CatalogEntry{
				{Name: "sriov-network-operator.v4.16.5", SkipRange: ">=4.15.0 <4.16.5"},
			}},
		}},
		{Name: "lvms-operator", DefaultChannel: "stable-4.16", Layout: LayoutSplit, Channels: []CatalogChannel{
			{Name: "stable-4.16", Entries: []CatalogEntry{
				{Name: "lvms-operator.v4.16.0", SkipRange: ">=4.15.0 <4.16.0"},
				{Name: "lvms-operator.v4.16.1", Replaces: "lvms-operator.v4.16.0", SkipRange: ">=4.15.0 <4.16.1"},
			}},
			{Name: "stable-4.15", Entries: []CatalogEntry{
				{Name: "lvms-operator.v4.15.2"},
				{Name: "lvms-operator.v4.15.3", Skips: []string{"lvms-operator.v4.15.2"}},
			}},
		}},
		{Name: "broken-operator", DefaultChannel: "alpha", Layout: LayoutJSON, Channels: []CatalogChannel{
			{Name: "alpha", Entries: []CatalogEntry{
				{Name: "broken-operator.v0.1.0"},
				{Name: "broken-operator.v0.2.0"},
			}},
		}},
	}
}

func (o *CatalogOptions) defaults() error {
	if o.Repo == "" {
		o.Repo = "redhat/redhat-operator-index"
	}
	if o.Tag == "" {
		o.Tag = "v4.16"
	}
	if o.ImagePrefix == "" {
		o.ImagePrefix = "operators"
	}
	if o.ConfigsDir == "" {
		o.ConfigsDir = "/configs"
	}
	if o.NoLabel && o.ConfigsDir != "/configs" {
		return fmt.Errorf("payload: catalog without label must use /configs, not %s", o.ConfigsDir)
	}
	if o.Packages == nil {
		o.Packages = DefaultCatalogPackages()
	}
	for _, p := range o.Packages {
		switch p.Layout {
		case LayoutJSON, LayoutYAML, LayoutSplit:
		default:
			return fmt.Errorf("payload: package %s: unknown layout %q", p.Name, p.Layout)
		}
	}
	return nil
}

// The file-based catalog objects, with the fields opm writes.
type (
	fbcPackage struct {
		Schema         string `json:"schema"`
		Name           string `json:"name"`
		DefaultChannel string `json:"defaultChannel"`
		Description    string `json:"description,omitempty"`
	}
	fbcChannel struct {
		Schema  string         `json:"schema"`
		Name    string         `json:"name"`
		Package string         `json:"package"`
		Entries []CatalogEntry `json:"entries"`
	}
	fbcBundle struct {
		Schema        string         `json:"schema"`
		Name          string         `json:"name"`
		Package       string         `json:"package"`
		Image         string         `json:"image"`
		Properties    []fbcProperty  `json:"properties"`
		RelatedImages []fbcRelatedIm `json:"relatedImages"`
	}
	fbcProperty struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	fbcRelatedIm struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
)

// MarshalJSON writes an entry with opm's field names, leaving empty edges out.
func (e CatalogEntry) MarshalJSON() ([]byte, error) {
	type entry struct {
		Name      string   `json:"name"`
		Replaces  string   `json:"replaces,omitempty"`
		Skips     []string `json:"skips,omitempty"`
		SkipRange string   `json:"skipRange,omitempty"`
	}
	return json.Marshal(entry(e))
}

// GenerateCatalog pushes the bundles (with their operator and operand images) and then a
// catalog image whose file-based catalog names them, to the registry at registryAddr.
// Each package's files are one layer; a root layer holds an .indexignore and a README the
// catalog ignores.
func GenerateCatalog(ctx context.Context, registryAddr string, opts CatalogOptions) (*Catalog, error) {
	o := opts
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ropts := remoteOptions(ctx, o.Transport, o.Auth)
	cat := &Catalog{ConfigsDir: o.ConfigsDir, Files: map[string][]byte{}, Bundles: map[string]CatalogBundle{}}
	configs := strings.Trim(path.Clean(o.ConfigsDir), "/")

	cat.Files[".indexignore"] = []byte("# not catalog content\n*.md\n")
	cat.Files["README.md"] = []byte("This catalog is generated for tests; it is not a catalog object.\n")
	var layers []*blob
	var history []string
	root, err := buildLayer([]file{
		{Name: "bin/opm", Mode: 0o755, Data: []byte("#!/bin/sh\necho opm stand-in\n")},
		{Name: configs + "/.indexignore", Mode: 0o644, Data: cat.Files[".indexignore"]},
		{Name: configs + "/README.md", Mode: 0o644, Data: cat.Files["README.md"]},
	})
	if err != nil {
		return nil, err
	}
	layers, history = append(layers, root), append(history, "ADD opm and catalog root")

	for _, p := range o.Packages {
		bundles, err := pushBundles(ctx, registryAddr, &o, p, ropts)
		if err != nil {
			return nil, err
		}
		files, err := packageFiles(p, bundles)
		if err != nil {
			return nil, err
		}
		var fs []file
		for _, n := range slices.Sorted(maps.Keys(files)) {
			cat.Files[n] = files[n]
			fs = append(fs, file{Name: configs + "/" + n, Mode: 0o644, Data: files[n]})
		}
		l, err := buildLayer(fs)
		if err != nil {
			return nil, err
		}
		layers, history = append(layers, l), append(history, "ADD catalog of "+p.Name)
		for _, b := range bundles {
			cat.Bundles[b.bundle.Name] = b.bundle
		}
	}

	cfg := v1.Config{Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", o.ConfigsDir}}
	if !o.NoLabel {
		cfg.Labels = map[string]string{CatalogConfigsLabel: o.ConfigsDir}
	}
	img, err := buildImage("amd64", true, layers, history, cfg)
	if err != nil {
		return nil, err
	}
	tag, err := name.NewTag(registryAddr + "/" + o.Repo + ":" + o.Tag)
	if err != nil {
		return nil, fmt.Errorf("payload: catalog tag: %w", err)
	}
	if err := pushImage(ctx, tag, img, ropts); err != nil {
		return nil, err
	}
	cat.Ref = tag.String()
	cat.Digest = img.digest.String()
	cat.PullSpec = tag.Context().String() + "@" + cat.Digest
	return cat, nil
}

// generatedBundle is a pushed bundle with its catalog object.
type generatedBundle struct {
	bundle CatalogBundle
	obj    fbcBundle
}

// pushBundles pushes, for every distinct bundle of the package, an operator image, an
// operand image and a bundle image whose ClusterServiceVersion relates both.
func pushBundles(ctx context.Context, reg string, o *CatalogOptions, p CatalogPackage, ropts []remote.Option) ([]generatedBundle, error) {
	var names []string
	seen := map[string]bool{}
	for _, ch := range p.Channels {
		for _, e := range ch.Entries {
			if !seen[e.Name] {
				seen[e.Name] = true
				names = append(names, e.Name)
			}
		}
	}
	var out []generatedBundle
	for _, bn := range names {
		version := bn
		if i := strings.Index(bn, ".v"); i >= 0 {
			version = bn[i+2:]
		}
		prefix := reg + "/" + o.ImagePrefix + "/"
		opRepo, operandRepo, bundleRepo := prefix+p.Name, prefix+p.Name+"-operand", prefix+p.Name+"-bundle"

		operator, err := tinyImage(bn+" operator", "usr/bin/"+p.Name)
		if err != nil {
			return nil, err
		}
		operand, err := tinyImage(bn+" operand", "usr/bin/"+p.Name+"-daemon")
		if err != nil {
			return nil, err
		}
		opRef := opRepo + "@" + operator.digest.String()
		operandRef := operandRepo + ":v" + version
		if err := pushTo(ctx, opRepo+":v"+version, operator, ropts); err != nil {
			return nil, err
		}
		if err := pushTo(ctx, operandRef, operand, ropts); err != nil {
			return nil, err
		}
		related := []CatalogRelated{
			{Name: "operator", Image: opRef, Digest: operator.digest.String()},
			{Name: "operand", Image: operandRef, Digest: operand.digest.String()},
		}
		bundleImg, err := bundleImage(p.Name, bn, related)
		if err != nil {
			return nil, err
		}
		if err := pushTo(ctx, bundleRepo+":v"+version, bundleImg, ropts); err != nil {
			return nil, err
		}
		bundleRef := bundleRepo + "@" + bundleImg.digest.String()
		obj := fbcBundle{Schema: "olm.bundle", Name: bn, Package: p.Name, Image: bundleRef,
			Properties: []fbcProperty{
				{Type: "olm.package", Value: map[string]string{"packageName": p.Name, "version": version}},
				{Type: "olm.gvk", Value: map[string]string{"group": "example.openshift.io", "kind": "Config", "version": "v1"}},
				{Type: "olm.maxOpenShiftVersion", Value: "4.17"},
			},
			// opm lists the bundle itself first, without a name.
			RelatedImages: []fbcRelatedIm{{Name: "", Image: bundleRef}},
		}
		for _, r := range related {
			obj.RelatedImages = append(obj.RelatedImages, fbcRelatedIm{Name: r.Name, Image: r.Image})
		}
		out = append(out, generatedBundle{
			bundle: CatalogBundle{Name: bn, Package: p.Name, Version: version, Image: bundleRef, Digest: bundleImg.digest.String(), Related: related},
			obj:    obj,
		})
	}
	return out, nil
}

// tinyImage is a one-file image whose content is unique to what.
func tinyImage(what, bin string) (*image, error) {
	l, err := buildLayer([]file{{Name: bin, Mode: 0o755, Data: []byte("#!/bin/sh\necho " + what + "\n")}})
	if err != nil {
		return nil, err
	}
	return buildImage("amd64", false, []*blob{l}, []string{"ADD " + what}, v1.Config{Entrypoint: []string{"/" + bin}})
}

// bundleImage is a registry+v1 bundle: manifests/ with the ClusterServiceVersion and
// metadata/annotations.yaml, plus the labels a bundle carries.
func bundleImage(pkg, bundle string, related []CatalogRelated) (*image, error) {
	type rel struct {
		Name  string `yaml:"name"`
		Image string `yaml:"image"`
	}
	var rs []rel
	for _, r := range related {
		rs = append(rs, rel{r.Name, r.Image})
	}
	csv := map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": map[string]any{
			"name":        bundle,
			"annotations": map[string]string{"containerImage": related[0].Image},
		},
		"spec": map[string]any{"relatedImages": rs},
	}
	csvYAML, err := yaml.Marshal(csv)
	if err != nil {
		return nil, err
	}
	annotations := map[string]any{"annotations": map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
		"operators.operatorframework.io.bundle.package.v1":   pkg,
	}}
	annYAML, err := yaml.Marshal(annotations)
	if err != nil {
		return nil, err
	}
	l, err := buildLayer([]file{
		{Name: "manifests/" + pkg + ".clusterserviceversion.yaml", Mode: 0o644, Data: csvYAML},
		{Name: "metadata/annotations.yaml", Mode: 0o644, Data: annYAML},
	})
	if err != nil {
		return nil, err
	}
	return buildImage("amd64", false, []*blob{l}, []string{"COPY manifests metadata"}, v1.Config{Labels: annotations["annotations"].(map[string]string)})
}

// packageFiles writes a package's catalog objects in its layout, by path relative to the
// catalog directory.
func packageFiles(p CatalogPackage, bundles []generatedBundle) (map[string][]byte, error) {
	pkgObj := fbcPackage{Schema: "olm.package", Name: p.Name, DefaultChannel: p.DefaultChannel, Description: p.Name + " for tests"}
	var chans, bobjs []any
	for _, ch := range p.Channels {
		chans = append(chans, fbcChannel{Schema: "olm.channel", Name: ch.Name, Package: p.Name, Entries: ch.Entries})
	}
	for _, b := range bundles {
		bobjs = append(bobjs, b.obj)
	}
	all := append(append([]any{pkgObj}, chans...), bobjs...)
	out := map[string][]byte{}
	switch p.Layout {
	case LayoutJSON:
		b, err := jsonStream(all)
		if err != nil {
			return nil, err
		}
		out[p.Name+"/catalog.json"] = b
	case LayoutYAML:
		b, err := yamlDocs(all)
		if err != nil {
			return nil, err
		}
		out[p.Name+"/catalog.yaml"] = b
	case LayoutSplit:
		b, err := yamlDocs([]any{pkgObj})
		if err != nil {
			return nil, err
		}
		out[p.Name+"/package.yaml"] = b
		for i, ch := range chans {
			if b, err = jsonStream([]any{ch}); err != nil {
				return nil, err
			}
			out[p.Name+"/channels/"+p.Channels[i].Name+".json"] = b
		}
		for i, bo := range bobjs {
			if b, err = yamlDocs([]any{bo}); err != nil {
				return nil, err
			}
			out[p.Name+"/bundles/"+bundles[i].bundle.Name+".yaml"] = b
		}
	}
	return out, nil
}

// jsonStream writes objects as indented JSON, one after another, as opm render does.
func jsonStream(objs []any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "    ")
	enc.SetEscapeHTML(false)
	for _, o := range objs {
		if err := enc.Encode(o); err != nil {
			return nil, fmt.Errorf("payload: catalog JSON: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// yamlDocs writes objects as YAML documents, each opened by "---".
func yamlDocs(objs []any) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objs {
		// Through JSON so the field names are the JSON ones.
		j, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(j, &v); err != nil {
			return nil, err
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("payload: catalog YAML: %w", err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

func pushTo(ctx context.Context, ref string, img *image, ropts []remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("payload: %s: %w", ref, err)
	}
	return pushImage(ctx, r, img, ropts)
}

func pushImage(ctx context.Context, ref name.Reference, img *image, ropts []remote.Option) error {
	if err := pushBlobs(ctx, 2, ref.Context(), []*image{img}, ropts); err != nil {
		return err
	}
	return putManifest(ref, img, ropts)
}
