package ociseed

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// Referrer is a file attached to a seed, such as validation.json or run.json.
type Referrer struct {
	File         string // path of the file to attach
	ArtifactType string // e.g. "application/vnd.snofactory.validation.v1+json"
	data         []byte // File's content, once read by readReferrers
}

// readReferrers reads every file to attach before anything is pushed, so a FIFO, a device
// or a file over the cap is the user's input refused up front, not a failure after the
// seed was sent.
func readReferrers(rs []Referrer) error {
	for i := range rs {
		b, err := smallfile.Read(rs[i].File, maxAttachment)
		if err != nil {
			return badinput.Errorf("--attach: %w", err)
		}
		rs[i].data = b
	}
	return nil
}

// manifestDescriptor describes a manifest as a subject.
func manifestDescriptor(raw []byte) ocispec.Descriptor {
	var m struct {
		MediaType    string `json:"mediaType"`
		ArtifactType string `json:"artifactType"`
	}
	_ = json.Unmarshal(raw, &m) // we wrote it; a missing field only leaves it empty
	return ocispec.Descriptor{MediaType: m.MediaType, ArtifactType: m.ArtifactType, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
}

// pushReferrer stores r as an artifact whose subject is the seed. Its config is the empty
// JSON object with the artifact type as media type, so registries without the referrers
// API, whose fallback index go-containerregistry fills from config.mediaType, list the
// right type too.
func pushReferrer(ctx context.Context, t target, subject ocispec.Descriptor, r Referrer, p *progress) (digest.Digest, error) {
	if r.ArtifactType == "" {
		return "", fmt.Errorf("attaching %s: no artifact type", r.File)
	}
	b := r.data
	if b == nil {
		var err error
		if b, err = smallfile.Read(r.File, maxAttachment); err != nil {
			return "", fmt.Errorf("attaching to the seed: %w", err)
		}
	}
	name := filepath.Base(r.File)
	mt := "application/octet-stream"
	if strings.HasSuffix(name, ".json") {
		mt = "application/json"
	}
	layer := bytesBlob(mt, b, name)
	layer.desc.Annotations = map[string]string{ocispec.AnnotationTitle: name}
	config := bytesBlob(r.ArtifactType, []byte("{}"), name+" config")
	for _, bl := range []blob{layer, config} {
		if err := putBlob(ctx, t, bl, p); err != nil {
			return "", err
		}
	}
	raw, err := json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: r.ArtifactType,
		Config:       config.desc,
		Layers:       []ocispec.Descriptor{layer.desc},
		Subject:      &subject,
		Annotations:  map[string]string{ocispec.AnnotationTitle: name},
	})
	if err != nil {
		return "", fmt.Errorf("encoding the manifest of %s: %w", name, err)
	}
	if err := t.putManifest(ctx, raw, false); err != nil {
		return "", err
	}
	return digest.FromBytes(raw), nil
}

// AttachReferrer attaches file to the seed at ref as an artifact of artifactType whose
// subject is the seed, and returns the new artifact's digest. An oci-archive is written
// whole, so attach to one with Push's WithReferrers instead.
func AttachReferrer(ctx context.Context, ref, file, artifactType string, opts ...Option) (digest.Digest, error) {
	o := makeOptions(opts)
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return "", err
	}
	if loc.Transport == TransportOCIArchive {
		return "", fmt.Errorf("%s: an oci-archive cannot be added to; push with the referrers instead", ref)
	}
	src, err := openSource(ctx, loc, o)
	if err != nil {
		return "", err
	}
	defer src.close()
	_, raw, err := src.resolve(ctx)
	if err != nil {
		return "", err
	}
	if top := manifestDescriptor(raw); top.ArtifactType != seed.ArtifactType {
		return "", fmt.Errorf("%s: not a seed: artifactType %q", ref, top.ArtifactType)
	}
	t, err := openTarget(ctx, loc, o)
	if err != nil {
		return "", err
	}
	d, err := pushReferrer(ctx, t, manifestDescriptor(raw), Referrer{File: file, ArtifactType: artifactType}, &progress{f: o.progress, total: 2})
	if err != nil {
		return "", err
	}
	return d, t.commit()
}

// Referrers lists the artifacts attached to the seed at ref, of artifactType when it is
// not empty.
func Referrers(ctx context.Context, ref, artifactType string, opts ...Option) ([]ocispec.Descriptor, error) {
	o := makeOptions(opts)
	src, _, err := openRef(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	defer src.close()
	subject, _, err := src.resolve(ctx)
	if err != nil {
		return nil, err
	}
	all, err := src.referrers(ctx, subject)
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, d := range all {
		if artifactType == "" || d.ArtifactType == artifactType {
			out = append(out, d)
		}
	}
	return out, nil
}

// referrers uses the registry's referrers API, or go-containerregistry's fallback tag
// (sha256-HEX) on registries without it.
func (r *registry) referrers(ctx context.Context, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	idx, err := remote.Referrers(r.ref.Context().Digest(subject.Digest.String()), append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, fmt.Errorf("listing the referrers of %s: %w", r.ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("listing the referrers of %s: %w", r.ref, err)
	}
	var out []ocispec.Descriptor
	for _, m := range im.Manifests {
		out = append(out, ocispec.Descriptor{MediaType: string(m.MediaType), ArtifactType: m.ArtifactType,
			Digest: digest.Digest(m.Digest.String()), Size: m.Size, Annotations: m.Annotations})
	}
	return out, nil
}

// referrersInIndex finds, among the manifests an index lists, those whose subject is subject.
func referrersInIndex(ctx context.Context, src source, idx ocispec.Index, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var out []ocispec.Descriptor
	for _, d := range idx.Manifests {
		if d.Digest == subject.Digest || d.MediaType != ocispec.MediaTypeImageManifest {
			continue
		}
		raw, err := readBlob(ctx, src, d, maxMetadata)
		if err != nil {
			return nil, err
		}
		var m ocispec.Manifest
		if err := strictjson.DecodeOpen(raw, &m); err != nil {
			return nil, fmt.Errorf("decoding manifest %s: %w", d.Digest, err)
		}
		if m.Subject != nil && m.Subject.Digest == subject.Digest {
			d.ArtifactType = m.ArtifactType
			out = append(out, d)
		}
	}
	return out, nil
}
