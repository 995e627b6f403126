package blueprints

import (
	"os"
	"path/filepath"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/manifest"
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
	}
	for _, p := range problems {
		report(p)
	}
	if n == 0 {
		report(manifest.Problem{Message: manifest.NoManifests, Hint: "remove extraManifests or add YAML manifests to it"})
	}
}
