package siteconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// Limits on referenced files.
const (
	maxPullSecretSize = 1 << 20
	// A manifest is carried inline, and the decoder bounds strings at 256 KiB.
	maxManifestSize = 256 << 10
	maxManifestDocs = 100
)

const selfContainedHint = "a site config read from a medium carries its files inline"

// resolve makes a reference relative to the site config absolute; it reports false (and a
// problem) when the config is self-contained and may not reference files.
func (c *checker) resolve(path, ref string) (string, bool) {
	if c.dir == "" {
		c.Add(path, "file references are not allowed here", selfContainedHint)
		return "", false
	}
	if filepath.IsAbs(ref) {
		return ref, true
	}
	return filepath.Join(c.dir, ref), true
}

// pullSecret reads and checks the pull secret; no message quotes it.
func (c *checker) pullSecret(s *Spec) {
	const p = "spec.pullSecretFile"
	switch {
	case s.PullSecretFile != "" && s.PullSecret != "":
		c.Add(p, "pullSecretFile and pullSecret are mutually exclusive", "keep pullSecretFile")
		return
	case s.PullSecretFile != "" && (strings.ContainsAny(s.PullSecretFile, "{}\"\n") || len(s.PullSecretFile) > 4096):
		c.Add(p, "must name a file, not hold the pull secret itself", "save the secret to a file (mode 0600) and give its path; remove it from the site config")
		return
	case s.PullSecretFile != "":
		abs, ok := c.resolve(p, s.PullSecretFile)
		if !ok {
			return
		}
		data, err := smallfile.Read(abs, maxPullSecretSize)
		if err != nil {
			c.Add(p, fmt.Sprintf("cannot read the pull secret %s: %v", s.PullSecretFile, unwrapPathError(err)), "")
			return
		}
		if msg := checks.PullSecret(data); msg != "" {
			c.Add(p, msg, "the file must hold {\"auths\": {\"REGISTRY\": {\"auth\": \"...\"}}}")
			return
		}
		s.PullSecret = string(data)
	case s.PullSecret != "":
		if msg := checks.PullSecret([]byte(s.PullSecret)); msg != "" {
			c.Add("spec.pullSecret", msg, "")
		}
	}
}

// manifests reads spec.extraManifests into spec.manifests and checks every manifest.
func (c *checker) manifests(s *Spec) {
	inline := len(s.Manifests) // those read from files are appended after these
	for i, ref := range s.ExtraManifests {
		p := fmt.Sprintf("spec.extraManifests[%d]", i)
		abs, ok := c.resolve(p, ref)
		if !ok {
			continue
		}
		files, err := manifestFiles(abs)
		if err != nil {
			c.Add(p, fmt.Sprintf("%s: %v", ref, err), "")
			continue
		}
		for _, f := range files {
			data, err := smallfile.Read(f, maxManifestSize)
			if err != nil {
				c.Add(p, fmt.Sprintf("cannot read %s: %v", f, unwrapPathError(err)), "")
				continue
			}
			s.Manifests = append(s.Manifests, Manifest{Name: filepath.Base(f), Content: string(data)})
		}
	}
	if len(s.Manifests) > maxManifests {
		c.Add("spec.manifests", fmt.Sprintf("%d manifests, more than the limit of %d", len(s.Manifests), maxManifests), "")
		return
	}
	seen := map[string]bool{}
	for i, m := range s.Manifests {
		p := fmt.Sprintf("spec.manifests[%d]", i)
		if i >= inline {
			p = "spec.extraManifests" // read from a file: the reference is what the user wrote
		}
		switch {
		case !validManifestName(m.Name):
			c.Add(p, fmt.Sprintf("%q is not a manifest file name", m.Name), "a base name ending in .yaml, .yml or .json")
		case seen[m.Name]:
			c.Add(p, fmt.Sprintf("two manifests are named %s", m.Name), "manifests are applied by file name: rename one")
		}
		seen[m.Name] = true
		if err := checkManifest([]byte(m.Content)); err != nil {
			c.Add(p, fmt.Sprintf("%s: %v", m.Name, err), "every manifest is a Kubernetes object: apiVersion, kind and metadata.name")
		}
	}
}

func validManifestName(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return name != "" && !strings.ContainsAny(name, "/\\\x00") && !strings.HasPrefix(name, ".") &&
		(ext == ".yaml" || ext == ".yml" || ext == ".json")
}

// manifestFiles lists a manifest file, or a directory's *.yaml, *.yml and *.json files
// (top level, sorted; hidden files skipped, other files refused so none is silently left out).
func manifestFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if len(entries) > maxManifests {
		return nil, fmt.Errorf("%d entries, more than the limit of %d", len(entries), maxManifests)
	}
	var files []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.IsDir() || !validManifestName(e.Name()) {
			return nil, fmt.Errorf("%s is not a manifest (.yaml, .yml or .json)", e.Name())
		}
		files = append(files, filepath.Join(path, e.Name()))
	}
	if len(files) == 0 {
		return nil, errors.New("the directory holds no manifests")
	}
	sort.Strings(files)
	return files, nil
}

// checkManifest checks that every YAML document of a manifest is a Kubernetes object.
func checkManifest(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	n := 0
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		switch {
		case errors.Is(err, io.EOF) && n == 0:
			return errors.New("no Kubernetes object")
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("document %d: %s", i, strings.TrimPrefix(err.Error(), "yaml: "))
		case i > maxManifestDocs:
			return fmt.Errorf("more than %d documents", maxManifestDocs)
		case len(node.Content) == 0 || node.Content[0].Tag == "!!null":
			continue // an empty document between --- markers
		case node.Content[0].Kind != yaml.MappingNode:
			return fmt.Errorf("document %d (line %d) is %s, not a Kubernetes object", i, node.Content[0].Line, strictyaml.Describe(node.Content[0]))
		}
		var doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := node.Decode(&doc); err != nil || doc.APIVersion == "" || doc.Kind == "" || doc.Metadata.Name == "" {
			return fmt.Errorf("document %d (line %d) lacks apiVersion, kind or metadata.name", i, node.Content[0].Line)
		}
		n++
	}
}
