package blueprints

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

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// Bounds on an extra-manifests directory.
const (
	maxManifestFiles = 500
	maxManifestFile  = 1 << 20
	maxManifestDocs  = 100
)

// checkManifests reads spec.openshift.extraManifests the way the install will consume it:
// every *.yaml, *.yml and *.json file directly in the directory, each YAML document a
// Kubernetes object with apiVersion, kind and metadata.name. Other files (except hidden
// ones such as .gitkeep) are refused so a stray file is not silently left out of the seed.
func (d *decoder) checkManifests(bp *v1alpha1.Blueprint) {
	o := bp.Spec.OpenShift
	if o == nil || o.ExtraManifests == "" {
		return
	}
	const path = "spec.openshift.extraManifests"
	dir := bp.Resolved.ExtraManifests
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return // Validate reported it
	}
	pos := d.Locate(path)
	report := func(msg, hint string) { d.AddAt(pos, path, msg, hint) }
	entries, err := os.ReadDir(dir)
	if err != nil {
		report(fmt.Sprintf("cannot read the directory: %v", err), "")
		return
	}
	if len(entries) > maxManifestFiles {
		report(fmt.Sprintf("%d entries, more than the limit of %d", len(entries), maxManifestFiles), "")
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	n := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // .gitkeep and editor files are not content
		}
		rel := filepath.ToSlash(filepath.Join(o.ExtraManifests, name))
		switch ext := strings.ToLower(filepath.Ext(name)); {
		case e.IsDir():
			report(fmt.Sprintf("%s is a directory; manifests are read from the top level only", rel), "")
			continue
		case ext != ".yaml" && ext != ".yml" && ext != ".json":
			report(fmt.Sprintf("%s is not a manifest (.yaml, .yml or .json)", rel), "move other files out of the manifests directory")
			continue
		}
		b, err := smallfile.Read(filepath.Join(dir, name), maxManifestFile)
		switch {
		case errors.Is(err, smallfile.ErrTooLarge):
			report(fmt.Sprintf("%s is larger than %d bytes", rel, maxManifestFile), "")
			continue
		case err != nil:
			report(fmt.Sprintf("cannot read %s: %v", rel, err), "")
			continue
		}
		n += d.checkManifest(rel, b, report)
	}
	if n == 0 {
		report("the directory holds no manifests", "remove extraManifests or add YAML manifests to it")
	}
}

// checkManifest checks the documents of one manifest file and returns how many it holds.
func (d *decoder) checkManifest(rel string, data []byte, report func(msg, hint string)) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	n := 0
	for i := 1; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			report(fmt.Sprintf("%s: invalid YAML: %s", rel, strings.TrimPrefix(err.Error(), "yaml: ")), "")
			return n
		}
		if i > maxManifestDocs {
			report(fmt.Sprintf("%s: more than %d documents", rel, maxManifestDocs), "")
			return n
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue // an empty document between --- markers
		}
		root := doc.Content[0]
		at := fmt.Sprintf("%s:%d:%d", rel, root.Line, root.Column)
		if root.Kind != yaml.MappingNode {
			report(fmt.Sprintf("%s: a manifest is a mapping, got %s", at, strictyaml.Describe(root)), "")
			continue
		}
		n++
		var missing []string
		for _, key := range []string{"apiVersion", "kind"} {
			if v := mappingValue(root, key); v == nil || v.Kind != yaml.ScalarNode || v.Value == "" {
				missing = append(missing, key)
			}
		}
		if meta := mappingValue(root, "metadata"); meta == nil || meta.Kind != yaml.MappingNode || mappingValue(meta, "name") == nil {
			missing = append(missing, "metadata.name")
		}
		if len(missing) > 0 {
			report(fmt.Sprintf("%s: manifest lacks %s", at, strings.Join(missing, ", ")), "every manifest is a Kubernetes object: apiVersion, kind and metadata.name")
		}
	}
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
