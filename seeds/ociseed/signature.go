package ociseed

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
)

// SignatureLayer is one signature as a layer of a sigstore attachment: its payload blob,
// media type and annotations (the signature itself is an annotation).
type SignatureLayer struct {
	MediaType   string
	Payload     []byte
	Annotations map[string]string
}

// SignatureTag is the tag sigstore attachments for the manifest d live under, as cosign,
// podman and skopeo look for them: "sha256-<hex>.sig".
func SignatureTag(d digest.Digest) string {
	return strings.Replace(d.String(), ":", "-", 1) + ".sig"
}

// AttachSignature adds sig to the sigstore attachments of the manifest d in ref's
// repository (a registry): the image tagged SignatureTag(d), created if missing, whose
// layers are the signatures. A signature already there is not added twice; the others are
// kept.
func AttachSignature(ctx context.Context, ref string, d digest.Digest, sig SignatureLayer, opts ...Option) error {
	o := makeOptions(opts)
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return err
	}
	if loc.Transport != TransportRegistry {
		return fmt.Errorf("%s: signatures are attached in a registry only", ref)
	}
	r, err := newRegistry(loc, o)
	if err != nil {
		return err
	}
	tag := loc.Ref.Context().Tag(SignatureTag(d))
	base := empty.Image
	desc, err := r.puller.Get(ctx, tag)
	switch {
	case err == nil:
		if base, err = desc.Image(); err != nil {
			return fmt.Errorf("reading the signatures of %s: %w", d, err)
		}
		m, err := base.Manifest()
		if err != nil {
			return fmt.Errorf("reading the signatures of %s: %w", d, err)
		}
		want := digest.FromBytes(sig.Payload).String()
		for _, l := range m.Layers {
			if l.Digest.String() == want && maps.Equal(l.Annotations, sig.Annotations) {
				return nil
			}
		}
	case isNotFound(err):
	default:
		return fmt.Errorf("reading the signatures of %s: %w", d, err)
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: static.NewLayer(sig.Payload, types.MediaType(sig.MediaType)), Annotations: sig.Annotations})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	if err := remote.Write(tag, img, append(r.opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("attaching the signature of %s as %s: %w", d, tag, err)
	}
	return nil
}
