package resolve

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/stages/internal/lockfile"

	"gopkg.in/yaml.v3"
)

// Paths inside a release image.
const (
	imageReferencesPath = "release-manifests/image-references"
	releaseMetadataPath = "release-manifests/release-metadata"
	installerComponent  = "installer"
	installerBinary     = "/usr/bin/openshift-install"
	machineOSImages     = "machine-os-images"
)

// payload is what resolve reads from a release image.
type payload struct {
	version    string
	components []component
	bootimages []byte // the coreos-bootimages stream JSON, if the release carries it
}

type component struct {
	name string
	ref  string
}

// imageStream is the part of /release-manifests/image-references we read.
type imageStream struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Tags []struct {
			Name string `json:"name"`
			From struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"from"`
		} `json:"tags"`
	} `json:"spec"`
}

// releaseMetadata is the part of /release-manifests/release-metadata we read.
type releaseMetadata struct {
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

func isBootimagesManifest(name string) bool {
	return path.Dir(name) == "release-manifests" && strings.Contains(path.Base(name), "coreos-bootimages") &&
		(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// readPayload reads the release metadata files from the release image's layers.
func (c *client) readPayload(ctx context.Context, im *image) (*payload, error) {
	files, err := c.readFiles(ctx, im, func(n string) bool {
		return n == imageReferencesPath || n == releaseMetadataPath || isBootimagesManifest(n)
	})
	if err != nil {
		return nil, err
	}
	refs, ok := files[imageReferencesPath]
	if !ok {
		return nil, fmt.Errorf("%s is not a release image: it has no /%s", im.named, imageReferencesPath)
	}
	var is imageStream
	if err := strictjson.DecodeOpen(refs, &is); err != nil {
		return nil, fmt.Errorf("release %s: parsing /%s: %w", im.named, imageReferencesPath, err)
	}
	p := &payload{version: is.Metadata.Name}
	for i, t := range is.Spec.Tags {
		if t.Name == "" || t.From.Name == "" {
			return nil, fmt.Errorf("release %s: /%s: spec.tags[%d] has no name or pull spec", im.named, imageReferencesPath, i)
		}
		p.components = append(p.components, component{name: t.Name, ref: t.From.Name})
	}
	if b, ok := files[releaseMetadataPath]; ok {
		var md releaseMetadata
		if err := strictjson.DecodeOpen(b, &md); err != nil {
			return nil, fmt.Errorf("release %s: parsing /%s: %w", im.named, releaseMetadataPath, err)
		}
		if md.Version != "" {
			p.version = md.Version
		}
	}
	for name, b := range files {
		if !isBootimagesManifest(name) {
			continue
		}
		stream, err := bootimagesStream(b)
		if err != nil {
			return nil, fmt.Errorf("release %s: /%s: %w", im.named, name, err)
		}
		p.bootimages = stream
	}
	return p, nil
}

// bootimagesStream returns data.stream of the coreos-bootimages ConfigMap.
func bootimagesStream(b []byte) ([]byte, error) {
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return nil, fmt.Errorf("parsing ConfigMap: %w", err)
	}
	s, ok := cm.Data["stream"]
	if !ok {
		return nil, fmt.Errorf("ConfigMap has no data.stream")
	}
	return []byte(s), nil
}

// coreosStream is the part of CoreOS stream metadata we read.
type coreosStream struct {
	Architectures map[string]struct {
		Artifacts map[string]struct {
			Formats map[string]map[string]struct {
				Location string `json:"location"`
				SHA256   string `json:"sha256"`
			} `json:"formats"`
		} `json:"artifacts"`
	} `json:"architectures"`
}

// liveISO finds the metal live ISO for arch in a CoreOS stream.
func liveISO(stream []byte, arch string) (*lockfile.LockedISO, error) {
	var s coreosStream
	if err := strictjson.DecodeOpen(stream, &s); err != nil {
		return nil, fmt.Errorf("parsing CoreOS stream metadata: %w", err)
	}
	a, ok := s.Architectures[arch]
	if !ok {
		return nil, fmt.Errorf("CoreOS stream has no architecture %s", arch)
	}
	disk, ok := a.Artifacts["metal"].Formats["iso"]["disk"]
	if !ok || disk.Location == "" {
		return nil, fmt.Errorf("CoreOS stream has no %s metal ISO (architectures.%s.artifacts.metal.formats.iso.disk)", arch, arch)
	}
	return &lockfile.LockedISO{URL: disk.Location, SHA256: disk.SHA256, From: "coreos-bootimages"}, nil
}
