package payload

import (
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// The on-image formats, as the cluster-version operator, oc and the
// installer read them. Only the fields a payload carries are modelled.

// ImageStream is /release-manifests/image-references.
type ImageStream struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Metadata   ObjectMeta        `json:"metadata"`
	Spec       ImageStreamSpec   `json:"spec"`
	Status     ImageStreamStatus `json:"status"`
}

// ObjectMeta is the subset of Kubernetes object metadata used here.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
}

// ImageStreamSpec holds the tags.
type ImageStreamSpec struct {
	LookupPolicy struct {
		Local bool `json:"local"`
	} `json:"lookupPolicy"`
	Tags []TagReference `json:"tags"`
}

// TagReference names one component image.
type TagReference struct {
	Name            string            `json:"name"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	From            *ObjectReference  `json:"from"`
	Generation      *int64            `json:"generation"`
	ImportPolicy    struct{}          `json:"importPolicy"`
	ReferencePolicy struct {
		Type string `json:"type"`
	} `json:"referencePolicy"`
}

// ObjectReference is a tag's source; Kind is DockerImage and Name a pull
// spec by digest.
type ObjectReference struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// ImageStreamStatus is empty in release payloads.
type ImageStreamStatus struct {
	DockerImageRepository string `json:"dockerImageRepository"`
}

// CincinnatiMetadata is /release-manifests/release-metadata.
type CincinnatiMetadata struct {
	Kind     string            `json:"kind"`
	Version  string            `json:"version"`
	Previous []string          `json:"previous"`
	Next     []string          `json:"next,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Stream is CoreOS stream metadata (coreos/stream-metadata-go's format).
type Stream struct {
	Stream        string          `json:"stream"`
	Metadata      StreamMetadata  `json:"metadata"`
	Architectures map[string]Arch `json:"architectures"`
}

// StreamMetadata says when the stream was built.
type StreamMetadata struct {
	LastModified string `json:"last-modified"`
	Generator    string `json:"generator,omitempty"`
}

// Arch holds one architecture's artifacts by platform ("metal", ...).
type Arch struct {
	Artifacts map[string]PlatformArtifacts `json:"artifacts"`
}

// PlatformArtifacts holds one platform's formats ("iso", "pxe", ...), each
// a map of file kind ("disk", "kernel", ...) to artifact.
type PlatformArtifacts struct {
	Release string                         `json:"release"`
	Formats map[string]map[string]Artifact `json:"formats"`
}

// Artifact is one downloadable file.
type Artifact struct {
	Location           string `json:"location"`
	Signature          string `json:"signature,omitempty"`
	Sha256             string `json:"sha256"`
	UncompressedSha256 string `json:"uncompressed-sha256,omitempty"`
}

// ConfigMap is the Kubernetes ConfigMap of coreos-bootimages.
type ConfigMap struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   configMapMeta     `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
}

type configMapMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// BootImagesManifest is the file name of the coreos-bootimages ConfigMap in
// /release-manifests.
const BootImagesManifest = "0000_50_installer_coreos-bootimages.yaml"

func streamFor(o *Options, location, sum string) Stream {
	return Stream{
		Stream:   "rhcos-4.18",
		Metadata: StreamMetadata{LastModified: epoch.Format("2006-01-02T15:04:05Z"), Generator: "snofactory test/payload (synthetic)"},
		Architectures: map[string]Arch{
			"x86_64": {Artifacts: map[string]PlatformArtifacts{
				"metal": {Release: o.ISO.Release, Formats: map[string]map[string]Artifact{
					"iso": {"disk": {Location: location, Sha256: sum}},
				}},
			}},
		},
	}
}

// bootImagesYAML renders the ConfigMap the installer ships in the payload.
func bootImagesYAML(version string, stream Stream) ([]byte, error) {
	js, err := json.MarshalIndent(stream, "", "  ")
	if err != nil {
		return nil, err
	}
	cm := ConfigMap{
		APIVersion: "v1",
		Kind:       "ConfigMap",
		Metadata: configMapMeta{
			Name:      "coreos-bootimages",
			Namespace: "openshift-machine-config-operator",
			Annotations: map[string]string{
				"include.release.openshift.io/ibm-cloud-managed":              "true",
				"include.release.openshift.io/self-managed-high-availability": "true",
				"include.release.openshift.io/single-node-developer":          "true",
			},
		},
		Data: map[string]string{"releaseVersion": version, "stream": string(js)},
	}
	out, err := yaml.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("payload: bootimages yaml: %w", err)
	}
	return out, nil
}

// installerScript stands in for /usr/bin/openshift-install, which cannot
// exist here. It answers `version` as the real binary does and refuses the rest:
// openshift/installer cmd/openshift-install/version.go runVersionCmd prints the path it was
// run by (os.Args[0], not the bare name), the version, then "built from commit", "release
// image" and, from a later installer (runVersionCmd at de45fedd), "release architecture"
// lines; a binary copied out of the installer image names
// the CI default release by tag (pkg/asset/releaseimage/default.go).
func installerScript(version string) []byte {
	return []byte(fmt.Sprintf(`#!/bin/sh
# TEST STAND-IN generated by snofactory test/payload.
# This is NOT the real openshift-install; it only answers "version".
case "$1" in
version|--version)
	echo "$0 %[1]s"
	echo "built from commit 0000000000000000000000000000000000000000"
	echo "release image registry.ci.openshift.org/origin/release:4.16"
	echo "release architecture amd64"
	exit 0
	;;
esac
echo "openshift-install %[1]s: synthetic test stand-in, command not implemented: $*" >&2
exit 2
`, version))
}
