package ociseed

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Kinds of sigstore attachment, the suffix of the tag each lives under.
const (
	KindSignature   = "sig"
	KindAttestation = "att"
)

// SignatureLayer is one signature or attestation as a layer of a sigstore attachment: its
// payload blob, media type and annotations (a signature itself is an annotation; an
// attestation is a DSSE envelope that carries its own).
type SignatureLayer struct {
	MediaType   string
	Payload     []byte
	Annotations map[string]string
}

// SignatureTag is the tag sigstore signatures of the manifest d live under, as cosign,
// podman and skopeo look for them: "sha256-<hex>.sig".
func SignatureTag(d digest.Digest) string { return AttachmentTag(d, KindSignature) }

// AttachmentTag is the tag the attachments of kind (KindSignature, KindAttestation) of the
// manifest d live under: "sha256-<hex>.<kind>".
func AttachmentTag(d digest.Digest, kind string) string {
	return strings.Replace(d.String(), ":", "-", 1) + "." + kind
}

// AttachSignature adds sig to the sigstore signatures of the manifest d in ref's repository
// (a registry). A signature already there is not added twice; the others are kept.
func AttachSignature(ctx context.Context, ref string, d digest.Digest, sig SignatureLayer, opts ...Option) error {
	return attach(ctx, ref, d, KindSignature, sig, func(l v1.Descriptor) bool {
		return l.Digest.String() == digest.FromBytes(sig.Payload).String() && maps.Equal(l.Annotations, sig.Annotations)
	}, opts)
}

// AttachAttestation adds att, a DSSE envelope, to the attestations of the manifest d in
// ref's repository, replacing those with the same annotation replaceBy (such as the
// predicate type), as cosign attest --replace does: a re-published seed carries one
// provenance, not one per publish.
func AttachAttestation(ctx context.Context, ref string, d digest.Digest, att SignatureLayer, replaceBy string, opts ...Option) error {
	v, ok := att.Annotations[replaceBy]
	return attach(ctx, ref, d, KindAttestation, att, func(l v1.Descriptor) bool {
		return ok && l.Annotations[replaceBy] == v
	}, opts)
}

// attach writes the attachment image of kind for d with layer added and every layer for
// which drop holds removed. An attachment whose only match is byte-identical to layer is
// left alone.
func attach(ctx context.Context, ref string, d digest.Digest, kind string, layer SignatureLayer, drop func(v1.Descriptor) bool, opts []Option) error {
	o := makeOptions(opts)
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return err
	}
	if loc.Transport != TransportRegistry {
		return fmt.Errorf("%s: signatures and attestations are attached in a registry only", ref)
	}
	r, err := newRegistry(loc, o)
	if err != nil {
		return err
	}
	tag := loc.Ref.Context().Tag(AttachmentTag(d, kind))
	img, err := attachmentImage(ctx, r, tag)
	if err != nil {
		return fmt.Errorf("reading the %s attachments of %s: %w", kind, d, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading the %s attachments of %s: %w", kind, d, err)
	}
	var adds []mutate.Addendum
	want := digest.FromBytes(layer.Payload).String()
	for _, l := range m.Layers {
		if !drop(l) {
			adds = append(adds, mutate.Addendum{Layer: lazyLayer{tag, l}, Annotations: l.Annotations})
			continue
		}
		if l.Digest.String() == want && maps.Equal(l.Annotations, layer.Annotations) {
			return nil
		}
	}
	adds = append(adds, mutate.Addendum{Layer: static.NewLayer(layer.Payload, types.MediaType(layer.MediaType)), Annotations: layer.Annotations})
	out, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return err
	}
	out = mutate.ConfigMediaType(mutate.MediaType(out, types.OCIManifestSchema1), types.OCIConfigJSON)
	if err := remote.Write(tag, out, append(r.opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("attaching to %s as %s: %w", d, tag, err)
	}
	return nil
}

// maxAttachmentLayers bounds how many signatures or attestations one manifest may carry
// before we stop reading them: real ones carry a handful.
const maxAttachmentLayers = 256

// attachmentImage is the attachment image at tag, or an empty image when there is none. Its
// manifest is bounded before it is read: a registry's answer is untrusted.
func attachmentImage(ctx context.Context, r *registry, t name.Tag) (v1.Image, error) {
	head, err := r.puller.Head(ctx, t)
	switch {
	case isNotFound(err):
		return empty.Image, nil
	case err != nil:
		return nil, err
	case head.Size > maxMetadata:
		return nil, fmt.Errorf("%s: a manifest of %d bytes, more than the %d expected", t, head.Size, maxMetadata)
	}
	desc, err := r.puller.Get(ctx, r.ref.Context().Digest(head.Digest.String()))
	if err != nil {
		return nil, err
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) > maxAttachmentLayers {
		return nil, fmt.Errorf("%s: %d layers, more than the %d expected", t, len(m.Layers), maxAttachmentLayers)
	}
	return img, nil
}

// lazyLayer is a layer of an existing attachment, kept as it is: the registry already has
// its blob, so it is never read.
type lazyLayer struct {
	tag  name.Tag
	desc v1.Descriptor
}

func (l lazyLayer) Digest() (v1.Hash, error)             { return l.desc.Digest, nil }
func (l lazyLayer) DiffID() (v1.Hash, error)             { return l.desc.Digest, nil }
func (l lazyLayer) Size() (int64, error)                 { return l.desc.Size, nil }
func (l lazyLayer) MediaType() (types.MediaType, error)  { return l.desc.MediaType, nil }
func (l lazyLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }
func (l lazyLayer) Compressed() (io.ReadCloser, error) {
	return nil, fmt.Errorf("%s: blob %s is already in the registry and is not read again", l.tag, l.desc.Digest)
}

// maxAttachment bounds one signature payload or attestation envelope read from a registry:
// an SBOM of a real node is a few MiB.
const maxAttachment = 64 << 20

// Attachments reads the attachments of kind (KindSignature, KindAttestation) of the
// manifest d in ref's repository; none is not an error. Every layer is bounded and checked
// against its digest: the registry's answers are untrusted.
func Attachments(ctx context.Context, ref string, d digest.Digest, kind string, opts ...Option) ([]SignatureLayer, error) {
	o := makeOptions(opts)
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return nil, err
	}
	if loc.Transport != TransportRegistry {
		return nil, nil
	}
	r, err := newRegistry(loc, o)
	if err != nil {
		return nil, err
	}
	tag := loc.Ref.Context().Tag(AttachmentTag(d, kind))
	img, err := attachmentImage(ctx, r, tag)
	if err != nil {
		return nil, fmt.Errorf("reading the %s attachments of %s: %w", kind, d, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading the %s attachments of %s: %w", kind, d, err)
	}
	var out []SignatureLayer
	for _, l := range m.Layers {
		if l.Size > maxAttachment {
			return nil, fmt.Errorf("%s: layer %s is %d bytes, more than the %d expected", tag, l.Digest, l.Size, maxAttachment)
		}
		rc, err := r.fetch(ctx, ocispec.Descriptor{Digest: digest.Digest(l.Digest.String()), Size: l.Size})
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(rc, l.Size+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: reading layer %s: %w", tag, l.Digest, err)
		}
		if int64(len(b)) != l.Size || digest.FromBytes(b).String() != l.Digest.String() {
			return nil, fmt.Errorf("%s: layer %s does not match its digest", tag, l.Digest)
		}
		out = append(out, SignatureLayer{MediaType: string(l.MediaType), Payload: b, Annotations: maps.Clone(l.Annotations)})
	}
	return out, nil
}
