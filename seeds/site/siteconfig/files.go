package siteconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks"
	"github.com/snofactory/snofactory/seeds/checks/manifest"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// maxPullSecretSize bounds the pull secret file.
const maxPullSecretSize = 1 << 20

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

// pullSecret reads and checks the pull secret; no message quotes it. A pull secret that is
// given but empty is refused, whatever its form: a key with no value, an empty file, "{}" or
// an "auths" with no registry, or a registry with neither "auth" nor "credsStore". Upstream
// refuses each: lifecycle-agent's post-pivot stops on a missing one
// (lca-cli/postpivot/postpivot.go createPullSecretFile), and the installer checks an
// image-based site's install-config.yaml pullSecret with pkg/validate/validate.go
// ImagePullSecret ("auths required", "requires either auth or credsStore"). A site config
// that gives none at all is not refused here, since a conformance OS site needs none; the
// OpenShift hook refuses it before changing anything.
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
		if msg := PullSecretProblem(data); msg != "" {
			c.Add(p, fmt.Sprintf("%s: %s", s.PullSecretFile, msg), pullSecretHint)
			return
		}
		s.PullSecret = string(data)
	case c.given("spec.pullSecretFile"):
		c.Add(p, "names no file", "give the path of the site's pull secret, or leave pullSecretFile out")
	case s.PullSecret != "" || c.given("spec.pullSecret"):
		if msg := PullSecretProblem([]byte(s.PullSecret)); msg != "" {
			c.Add("spec.pullSecret", msg, pullSecretHint)
		}
	}
}

const pullSecretHint = `the site's own pull secret, {"auths": {"REGISTRY": {"auth": "..."}}}, as console.redhat.com or the site's registry gives it`

// PullSecretProblem says what is wrong with a site's pull secret ("" when nothing), never
// quoting it: empty in any of its forms, not JSON, or a registry without credentials (the
// installer's pkg/validate/validate.go ImagePullSecret).
func PullSecretProblem(data []byte) string {
	if strings.TrimSpace(string(data)) == "" {
		return "the pull secret is empty"
	}
	if msg := checks.PullSecret(data); msg != "" {
		return msg
	}
	var ps struct {
		Auths map[string]map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &ps); err != nil {
		return "the pull secret's \"auths\" entries are not objects"
	}
	for _, reg := range slices.Sorted(maps.Keys(ps.Auths)) {
		_, auth := ps.Auths[reg]["auth"]
		_, store := ps.Auths[reg]["credsStore"]
		if !auth && !store {
			return fmt.Sprintf("the pull secret's registry %q has neither \"auth\" nor \"credsStore\"", suggest.Clip(reg))
		}
	}
	return ""
}

// manifests reads spec.extraManifests into spec.manifests and checks every manifest.
func (c *checker) manifests(s *Spec) {
	inline := len(s.Manifests) // those read from files are appended after these
	for i, ref := range s.ExtraManifests {
		p := fmt.Sprintf("spec.extraManifests[%d]", i)
		if abs, ok := c.resolve(p, ref); ok {
			s.Manifests = append(s.Manifests, c.readManifests(p, abs, ref)...)
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
		case !manifest.ValidName(m.Name):
			c.Add(p, fmt.Sprintf("%q is not a manifest file name", m.Name), "a base name ending in .yaml, .yml or .json")
		case seen[m.Name]:
			c.Add(p, fmt.Sprintf("two manifests are named %s", m.Name), "manifests are applied by file name: rename one")
		}
		seen[m.Name] = true
		n, problems := manifest.Check(m.Name, []byte(m.Content))
		for _, pr := range problems {
			c.Add(p, pr.Message, pr.Hint)
		}
		if n == 0 && len(problems) == 0 {
			c.Add(p, m.Name+": no Kubernetes object", manifest.Hint)
		}
	}
}

// readManifests reads the manifest file ref (at abs), or the manifests of the directory
// ref, reporting at p what cannot be read.
func (c *checker) readManifests(p, abs, ref string) []Manifest {
	fi, err := os.Stat(abs)
	if err != nil {
		c.Add(p, fmt.Sprintf("%s: %v", ref, unwrapPathError(err)), "")
		return nil
	}
	files := []string{abs}
	if fi.IsDir() {
		var problems []manifest.Problem
		files, problems = manifest.Dir(abs, ref)
		for _, pr := range problems {
			c.Add(p, pr.Message, pr.Hint)
		}
		if len(files) == 0 && len(problems) == 0 {
			c.Add(p, fmt.Sprintf("%s: %s", ref, manifest.NoManifests), "")
		}
	}
	var out []Manifest
	for _, f := range files {
		data, pr := manifest.Read(f, f, manifest.MaxInlineSize)
		if pr != nil {
			c.Add(p, pr.Message, pr.Hint)
			continue
		}
		out = append(out, Manifest{Name: filepath.Base(f), Content: string(data)})
	}
	return out
}
