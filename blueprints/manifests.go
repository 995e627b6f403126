package blueprints

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/manifest"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
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
	report := func(p manifest.Problem) { d.AddAt(pos, path, p.Message, p.Hint) }
	files, problems := manifest.Dir(dir, o.ExtraManifests)
	n := 0
	for _, f := range files {
		rel := filepath.ToSlash(filepath.Join(o.ExtraManifests, filepath.Base(f)))
		b, p := manifest.Read(f, rel, manifest.MaxFileSize)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		objects, ps := manifest.Check(rel, b)
		n += objects
		problems = append(problems, ps...)
		if len(ps) == 0 {
			problems = append(problems, ownedByManifests(rel, b)...)
		}
	}
	for _, p := range problems {
		report(p)
	}
	if n == 0 {
		report(manifest.Problem{Message: manifest.NoManifests, Hint: "remove extraManifests or add YAML manifests to it"})
	}
}

// ownedByManifests reports each file or unit a MachineConfig among the manifests of one
// file (already checked by manifest.Check) owns that the seal or the site hook changes,
// as checkOwnedFiles does for Butane fragments, at the line that names it.
func ownedByManifests(rel string, b []byte) []manifest.Problem {
	nc, err := loadNodeChanges()
	if err != nil {
		return []manifest.Problem{{Message: err.Error()}}
	}
	var problems []manifest.Problem
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if !errors.Is(err, io.EOF) {
				problems = append(problems, manifest.Problem{Message: fmt.Sprintf("%s: %v", rel, err)})
			}
			return problems
		}
		problems = append(problems, ownedByMachineConfig(rel, &doc, nc)...)
	}
}

// ownedByMachineConfig checks one manifest document when it is a MachineConfig.
func ownedByMachineConfig(rel string, doc *yaml.Node, nc nodeChanges) []manifest.Problem {
	var mc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Config yaml.Node `yaml:"config"`
		} `yaml:"spec"`
	}
	if doc.Decode(&mc) != nil || mc.Kind != "MachineConfig" || mc.Spec.Config.Kind == 0 {
		return nil
	}
	var cfg any
	if err := mc.Spec.Config.Decode(&cfg); err != nil {
		return []manifest.Problem{{Message: fmt.Sprintf("%s: MachineConfig %s: spec.config: %v", rel, suggest.Clip(mc.Metadata.Name), err)}}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return []manifest.Problem{{Message: fmt.Sprintf("%s: MachineConfig %s: spec.config: %v", rel, suggest.Clip(mc.Metadata.Name), err)}}
	}
	paths, err := ignitionPaths(raw)
	if err != nil {
		return []manifest.Problem{{Message: fmt.Sprintf("%s: MachineConfig %s: spec.config: %v", rel, suggest.Clip(mc.Metadata.Name), err)}}
	}
	var problems []manifest.Problem
	for _, p := range paths {
		by := nc.owners(p)
		if len(by) == 0 {
			continue
		}
		msg, hint := ownedProblem(suggest.Clip(mc.Metadata.Name), p, by)
		at := nodeNaming(&mc.Spec.Config, p)
		problems = append(problems, manifest.Problem{Message: fmt.Sprintf("%s:%d:%d: %s", rel, at.Line, at.Column, msg), Hint: hint})
	}
	return problems
}

// nodeNaming is the scalar under n that spells out node path p (a unit's path by the unit's
// name), or n itself.
func nodeNaming(n *yaml.Node, p string) *yaml.Node {
	for _, w := range spellings(p) {
		if found := findScalar(n, w); found != nil {
			return found
		}
	}
	return n
}

func findScalar(n *yaml.Node, v string) *yaml.Node {
	if n.Kind == yaml.ScalarNode && n.Value == v {
		return n
	}
	for _, c := range n.Content {
		if f := findScalar(c, v); f != nil {
			return f
		}
	}
	return nil
}
