package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/blueprints"
	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/test/testbin"
)

// DemoRegistry is the registry the demo blueprint names. Nothing listens there: demoenv
// serves the image on a free port and hands the command a copy of the blueprint naming it.
const DemoRegistry = testbin.DemoRegistry

// deriveBlueprint writes into dir a copy of the blueprint at path whose extra images on
// DemoRegistry are on addr instead, and returns the copy's path. The copy lives elsewhere,
// so its relative paths are made absolute; it must resolve every file to the one the
// original does, which catches a path this code does not know about.
//
// A copy rather than a redirection the build cannot see (a registries.conf mirror): the
// blueprint, the lock and the run record then say where the image really came from.
func deriveBlueprint(path, addr, dir string) (string, error) {
	bp, err := blueprints.LoadFile(path)
	if err != nil {
		return "", err
	}
	moved := 0
	for i, ref := range bp.Spec.ExtraImages {
		if rest, ok := strings.CutPrefix(ref, DemoRegistry+"/"); ok {
			bp.Spec.ExtraImages[i] = addr + "/" + rest
			moved++
		}
	}
	if moved == 0 {
		return "", fmt.Errorf("blueprint %s names no extra image on %s, the demo registry", path, DemoRegistry)
	}
	if rest, ok := strings.CutPrefix(bp.Spec.Outputs.Push, DemoRegistry+"/"); ok {
		bp.Spec.Outputs.Push = addr + "/" + rest
	}
	absolutePaths(bp)
	b, err := yaml.Marshal(bp)
	if err != nil {
		return "", fmt.Errorf("writing the demo blueprint: %w", err)
	}
	out := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return "", fmt.Errorf("writing the demo blueprint: %w", err)
	}
	check, err := blueprints.LoadFile(out)
	if err != nil {
		return "", fmt.Errorf("the demo blueprint's copy does not load: %w", err)
	}
	if !reflect.DeepEqual(check.Resolved, bp.Resolved) {
		return "", fmt.Errorf("the copy %s of %s names other files: %+v, want %+v", out, path, check.Resolved, bp.Resolved)
	}
	return out, nil
}

// absolutePaths replaces every path in bp by the absolute form the loader resolved.
func absolutePaths(bp *v1alpha1.Blueprint) {
	s, r := &bp.Spec, bp.Resolved
	if s.Source != nil {
		s.Source.Path = r.ISO
	}
	if o := s.OpenShift; o != nil {
		o.PullSecretFile, o.SSHPublicKeyFile, o.ExtraManifests = r.PullSecretFile, r.SSHPublicKeyFile, r.ExtraManifests
	}
	for i := range s.Butane {
		s.Butane[i].File = r.Butane[i]
	}
	copy(s.LiveISO.NetworkKeyfiles, r.NetworkKeyfiles)
	s.SignaturePolicyFile = r.SignaturePolicyFile
	s.Outputs.OCILayout = r.OCILayout
}
