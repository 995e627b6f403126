package siteconfig

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ImageDigestMirrorSet renders mirrors as an OpenShift ImageDigestMirrorSet
// (config.openshift.io/v1) named name, the successor of ImageContentSourcePolicy: a
// mirror serves images pulled by digest, as a release payload's are.
func ImageDigestMirrorSet(name string, mirrors []RegistryMirror) ([]byte, error) {
	if len(mirrors) == 0 {
		return nil, errors.New("rendering an ImageDigestMirrorSet: no registry mirrors")
	}
	type digestMirror struct {
		Source  string   `yaml:"source"`
		Mirrors []string `yaml:"mirrors"`
	}
	var obj struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			ImageDigestMirrors []digestMirror `yaml:"imageDigestMirrors"`
		} `yaml:"spec"`
	}
	obj.APIVersion, obj.Kind, obj.Metadata.Name = "config.openshift.io/v1", "ImageDigestMirrorSet", name
	for _, m := range mirrors {
		obj.Spec.ImageDigestMirrors = append(obj.Spec.ImageDigestMirrors, digestMirror{m.Source, m.Mirrors})
	}
	b, err := yaml.Marshal(&obj)
	if err != nil {
		return nil, fmt.Errorf("rendering the ImageDigestMirrorSet %s: %w", name, err)
	}
	return b, nil
}
