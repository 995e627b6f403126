package resolve

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/pkg/blobinfocache/none"
	"github.com/containers/image/v5/pkg/compression"
	"github.com/containers/image/v5/types"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/netlimit"
	"github.com/snofactory/snofactory/stages/internal/registries"
)

// maxManifestFile bounds a metadata file read into memory from a layer.
const maxManifestFile = 64 << 20

// client reads images from registries through containers/image.
type client struct {
	sys *types.SystemContext
	// policy is checked before anything of an opened image is read: resolve reads the
	// release and operator bundles and extracts openshift-install, which render runs.
	policy *registries.Policy
}

// newClient returns a client for sys, enforcing the signature policy sys names.
func newClient(sys *types.SystemContext) (*client, error) {
	policy, err := registries.OpenPolicy(sys)
	if err != nil {
		return nil, err
	}
	return &client{sys: sys, policy: policy}, nil
}

// image is one opened image: its source, the digest of what the reference named (a list or
// a single manifest) and, for layer access, the manifest of the chosen platform.
type image struct {
	named    reference.Named
	src      types.ImageSource
	digest   digest.Digest // of the manifest the reference points at (may be a list)
	instance digest.Digest // of the platform manifest (== digest for single images)
	manifest manifest.Manifest
}

func (im *image) Close() { im.src.Close() }

// pinned returns repo@digest for the reference.
func (im *image) pinned() string {
	return reference.TrimNamed(im.named).String() + "@" + im.digest.String()
}

func parseRef(ref string) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if d, ok := named.(reference.Digested); ok {
		// containers/image refuses tag+digest; the digest is what pins it.
		if _, tagged := named.(reference.Tagged); tagged {
			return reference.WithDigest(reference.TrimNamed(named), d.Digest())
		}
		return named, nil
	}
	return reference.TagNameOnly(named), nil
}

// watch bounds a registry operation on named's registry by the stall timeout the context
// carries: containers/image takes no transport of ours, so its answers are watched from
// outside (netlimit.Watch). what names what the registry was sending when it stalled.
func watch(ctx context.Context, named reference.Named, what string) (context.Context, *netlimit.Watchdog) {
	return netlimit.Watch(ctx, "registry", reference.Domain(named), what)
}

// open fetches the manifest of ref and, for a manifest list, the platform instance,
// retrying transient failures.
func (c *client) open(ctx context.Context, ref string) (im *image, err error) {
	named, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	err = retry(ctx, func() error {
		// Small answers only (manifests, signatures): the whole opening gets the time one
		// stalled answer would.
		wctx, w := watch(ctx, named, "manifest")
		defer w.Stop()
		im, err = c.openOnce(wctx, ref, named)
		return w.Err(err)
	})
	return im, err
}

func (c *client) openOnce(ctx context.Context, ref string, named reference.Named) (*image, error) {
	dref, err := docker.NewReference(named)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	src, err := dref.NewImageSource(ctx, c.sys)
	if err != nil {
		return nil, fmt.Errorf("opening image %s: %w", ref, err)
	}
	if err := c.policy.Allow(ctx, src, ref); err != nil {
		src.Close()
		return nil, err
	}
	im := &image{named: named, src: src}
	raw, mime, err := src.GetManifest(ctx, nil)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("fetching manifest of %s: %w", ref, err)
	}
	if im.digest, err = manifest.Digest(raw); err != nil {
		src.Close()
		return nil, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	if d, ok := named.(reference.Digested); ok && d.Digest() != im.digest {
		src.Close()
		return nil, fmt.Errorf("manifest of %s has digest %s, not the one pinned", ref, im.digest)
	}
	im.instance = im.digest
	if manifest.MIMETypeIsMultiImage(manifest.NormalizedMIMEType(mime)) {
		list, err := manifest.ListFromBlob(raw, mime)
		if err != nil {
			src.Close()
			return nil, fmt.Errorf("manifest list of %s: %w", ref, err)
		}
		if im.instance, err = list.ChooseInstance(c.sys); err != nil {
			src.Close()
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		if raw, mime, err = src.GetManifest(ctx, &im.instance); err != nil {
			src.Close()
			return nil, fmt.Errorf("fetching %s manifest of %s: %w", c.sys.ArchitectureChoice, ref, err)
		}
	}
	if im.manifest, err = manifest.FromBlob(raw, manifest.NormalizedMIMEType(mime)); err != nil {
		src.Close()
		return nil, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	return im, nil
}

// digestOf resolves ref to the digest of the manifest it names, without reading layers.
// References that already carry a digest are pinned already and cost no request.
func (c *client) digestOf(ctx context.Context, ref string) (string, digest.Digest, error) {
	named, err := parseRef(ref)
	if err != nil {
		return "", "", err
	}
	if d, ok := named.(reference.Digested); ok {
		return reference.TrimNamed(named).String() + "@" + d.Digest().String(), d.Digest(), nil
	}
	dref, err := docker.NewReference(named)
	if err != nil {
		return "", "", fmt.Errorf("image %s: %w", ref, err)
	}
	var dg digest.Digest
	err = retry(ctx, func() (err error) {
		wctx, w := watch(ctx, named, "manifest")
		defer w.Stop()
		dg, err = docker.GetDigest(wctx, c.sys, dref)
		return w.Err(err)
	})
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", ref, err)
	}
	return reference.TrimNamed(named).String() + "@" + dg.String(), dg, nil
}

// walkLayers calls fn for every regular file in the image's layers, bottom layer first, so a
// caller that keeps the last match sees what the container would. fn sees a layer again from
// its start when a transfer failed and was retried.
func (c *client) walkLayers(ctx context.Context, im *image, fn func(name string, hdr *tar.Header, r io.Reader) error) error {
	for _, l := range im.manifest.LayerInfos() {
		if err := retry(ctx, func() error { return c.walkLayer(ctx, im, l.BlobInfo, fn) }); err != nil {
			return fmt.Errorf("reading layer %s of %s: %w", l.Digest, im.named, err)
		}
	}
	return nil
}

// walkLayer reads one layer under a stall watch: a layer of any size takes as long as its
// bytes keep coming, and fails naming the registry once they stop for the stall timeout.
func (c *client) walkLayer(ctx context.Context, im *image, bi types.BlobInfo, fn func(string, *tar.Header, io.Reader) error) (err error) {
	ctx, w := watch(ctx, im.named, "layer "+bi.Digest.String())
	defer w.Stop()
	defer func() { err = w.Err(err) }()
	blob, _, err := im.src.GetBlob(ctx, bi, none.NoCache)
	if err != nil {
		return err
	}
	defer blob.Close()
	rc := w.Reader(blob)
	verifier := bi.Digest.Verifier()
	dr, _, err := compression.AutoDecompress(io.TeeReader(rc, verifier))
	if err != nil {
		return err
	}
	defer dr.Close()
	tr := tar.NewReader(dr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean("/" + hdr.Name)[1:]
		if err := fn(name, hdr, tr); err != nil {
			return err
		}
	}
	// Drain so the digest covers the whole blob, then refuse anything tampered with. The
	// wrapper hides pgzip's WriteTo, which panics when called after a partial Read.
	if _, err := io.Copy(io.Discard, struct{ io.Reader }{dr}); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return err
	}
	if !verifier.Verified() {
		return fmt.Errorf("layer content does not match digest %s", bi.Digest)
	}
	return nil
}

// readFiles returns the content of the files for which want is true (last layer wins).
func (c *client) readFiles(ctx context.Context, im *image, want func(string) bool) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := c.walkLayers(ctx, im, func(name string, hdr *tar.Header, r io.Reader) error {
		if !want(name) {
			return nil
		}
		if hdr.Size > maxManifestFile {
			return fmt.Errorf("%s is %d bytes, more than a manifest can be", name, hdr.Size)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		out[name] = b
		return nil
	})
	return out, err
}

// extractFile writes the file at name (absolute path in the image) to dst, returning its
// sha256. Layers are read from the top down and the search stops at the first layer that
// holds the file (or deletes it with a whiteout), so a binary in the top layer of a large
// image costs one layer.
func (c *client) extractFile(ctx context.Context, im *image, name, dst string) (digest.Digest, error) {
	sum, _, err := c.extractFileWith(ctx, im, name, dst, "")
	return sum, err
}

// extractFileWith is extractFile that also returns the content of the small file sidecar
// (absolute path; "" for none) when it lies in one of the layers the search reads, the
// topmost copy winning; nil when it is not there. A sidecar only in a layer below the file's
// is not seen: reading on would cost the whole image.
func (c *client) extractFileWith(ctx context.Context, im *image, name, dst, sidecar string) (digest.Digest, []byte, error) {
	want := strings.TrimPrefix(path.Clean(name), "/")
	whiteouts := whiteoutsOf(want)
	var side string
	var sideWhiteouts [2]string
	if sidecar != "" {
		side = strings.TrimPrefix(path.Clean(sidecar), "/")
		sideWhiteouts = whiteoutsOf(side)
	}
	var sideData []byte
	sideDone := side == ""
	tmp := dst + ".partial"
	defer os.Remove(tmp)
	layers := im.manifest.LayerInfos()
	for i := len(layers) - 1; i >= 0; i-- {
		var found digest.Digest
		var layerSide []byte
		deleted, sideDeleted := false, false
		err := retry(ctx, func() error {
			found, deleted, layerSide, sideDeleted = "", false, nil, false
			return c.walkLayer(ctx, im, layers[i].BlobInfo, func(n string, hdr *tar.Header, r io.Reader) error {
				if n == whiteouts[0] || n == whiteouts[1] {
					deleted = true
				}
				if !sideDone {
					if n == sideWhiteouts[0] || n == sideWhiteouts[1] {
						sideDeleted = true
					}
					if n == side {
						if hdr.Size > maxManifestFile {
							return fmt.Errorf("%s is %d bytes, more than a checksum file can be", sidecar, hdr.Size)
						}
						b, err := io.ReadAll(r)
						if err != nil {
							return fmt.Errorf("reading %s: %w", sidecar, err)
						}
						layerSide = b
					}
				}
				if n != want {
					return nil
				}
				f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
				if err != nil {
					return err
				}
				dg := digest.Canonical.Digester()
				if _, err := io.Copy(io.MultiWriter(f, dg.Hash()), r); err != nil {
					f.Close()
					return fmt.Errorf("extracting %s: %w", name, err)
				}
				if err := f.Close(); err != nil {
					return err
				}
				found = dg.Digest()
				return nil
			})
		})
		if err != nil {
			return "", nil, fmt.Errorf("reading layer %s of %s: %w", layers[i].Digest, im.named, err)
		}
		if !sideDone && (layerSide != nil || sideDeleted) {
			sideData, sideDone = layerSide, true
		}
		if found != "" {
			if err := os.Rename(tmp, dst); err != nil {
				return "", nil, err
			}
			return found, sideData, nil
		}
		if deleted {
			break
		}
	}
	return "", nil, fmt.Errorf("image %s has no %s", im.named, name)
}

// whiteoutsOf returns the entries that delete the file name (relative) in a lower layer: its
// own whiteout and the opaque marker of its directory.
func whiteoutsOf(name string) [2]string {
	dir, base := path.Split(name)
	return [2]string{dir + ".wh." + base, dir + ".wh..wh..opq"}
}
