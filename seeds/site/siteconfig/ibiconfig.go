package siteconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// The image-based installer's site inputs: `openshift-install image-based create
// config-image --dir DIR` reads DIR/image-based-config.yaml (kind ImageBasedConfig) and
// DIR/install-config.yaml. A site that already writes these keeps them: Load converts
// them into a site config, and refuses by position what the hook cannot apply.
const (
	ImageBasedConfigKind    = "ImageBasedConfig"
	imageBasedConfigVersion = "v1beta1"
	installConfigFile       = "install-config.yaml"
	extraManifestsDir       = "extra-manifests"
)

// imageBasedConfig is the installer's ImageBasedConfig (pkg/types/imagebased Config).
type imageBasedConfig struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace,omitempty"`
	} `yaml:"metadata"`
	Hostname string `yaml:"hostname"`
	// ReleaseRegistry is where the site pulls the release from; a seed carries its release
	// precached and never pulls it, so it is accepted and not needed.
	ReleaseRegistry      string            `yaml:"releaseRegistry,omitempty"`
	NetworkConfig        *Network          `yaml:"networkConfig,omitempty"`
	AdditionalNTPSources []string          `yaml:"additionalNTPSources,omitempty"`
	NodeLabels           map[string]string `yaml:"nodeLabels,omitempty"`
	ClusterID            string            `yaml:"cluster_id,omitempty"`
	InfraID              string            `yaml:"infra_id,omitempty"`
}

// installConfig is the part of install-config.yaml that a site's reconfiguration takes.
type installConfig struct {
	BaseDomain string `yaml:"baseDomain"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	PullSecret            string `yaml:"pullSecret"`
	AdditionalTrustBundle string `yaml:"additionalTrustBundle"`
	// The image-based installer takes the proxy and the trust bundle policy from
	// install-config.yaml, not from the ImageBasedConfig
	// (pkg/asset/imagebased/configimage/clusterconfiguration.go ClusterConfiguration.Generate).
	AdditionalTrustBundlePolicy string `yaml:"additionalTrustBundlePolicy"`
	Proxy                       *Proxy `yaml:"proxy"`
	SSHKey                      string `yaml:"sshKey"`
	// FIPS is the installer's types.InstallConfig FIPS: the site cluster must be in FIPS
	// mode, which only a seed built in it can give (seeds/site/fit).
	FIPS               bool `yaml:"fips"`
	ImageDigestSources []struct {
		Source  string   `yaml:"source"`
		Mirrors []string `yaml:"mirrors"`
	} `yaml:"imageDigestSources"`
}

// installConfigRefused are install-config.yaml settings the hook does not apply at a site.
var installConfigRefused = map[string]string{
	"imageContentSources": "imageContentSources (deprecated)",
}

// ibiPaths maps a site config path to where the same value sits in an ImageBasedConfig,
// longest prefix first, so problems name the user's own field.
var ibiPaths = []struct{ spec, ibi string }{
	{"spec.network", "networkConfig"},
	{"spec.ntp.servers", "additionalNTPSources"},
	{"spec.nodeLabels", "nodeLabels"},
	{"spec.hostname", "hostname"},
	{"spec.clusterID", "cluster_id"},
	{"spec.infraID", "infra_id"},
	{"metadata.name", "metadata.name"},
}

// isImageBasedConfig tells whether data is an ImageBasedConfig document (a top-level kind
// says so), without judging anything else about it: a duplicated key is for the strict
// decoder to report at its place, not a reason to read the file as another kind.
func isImageBasedConfig(data []byte) bool {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if m[i].Value == "kind" && m[i+1].Value == ImageBasedConfigKind {
			return true
		}
	}
	return false
}

// parseImageBasedConfig converts an ImageBasedConfig, and the install-config.yaml beside it
// when there is one, into a site config, validated as strictly as our own: every problem
// is reported at its place in the file that holds it.
func parseImageBasedConfig(data []byte, name, dir string) (sc *SiteConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc, err = nil, strictyaml.FileProblem(name, fmt.Sprintf("internal error reading the image-based config (a bug in snofactory): %v", r))
		}
	}()
	d := strictyaml.NewDecoder(name, "image-based config", []string{imageBasedConfigVersion}, reflect.TypeOf(imageBasedConfig{}))
	d.SetUnsupported(func(path string) (string, string) {
		if rest, ok := strings.CutPrefix(path, "networkConfig"); ok {
			return unsupportedNMState("spec.network" + rest)
		}
		return "", ""
	})
	root, ok := d.Parse(data)
	if !ok {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	var ibi imageBasedConfig
	d.Decode(root, &ibi)
	if d.Aborted() {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	if ibi.Kind != ImageBasedConfigKind {
		d.Report("kind", "must be "+ImageBasedConfigKind, "")
	}
	sc = &SiteConfig{APIVersion: APIVersion, Kind: Kind, dir: dir}
	sc.Metadata.Name = ibi.Metadata.Name
	s := &sc.Spec
	s.Hostname, s.Network, s.ClusterID, s.InfraID, s.NodeLabels = ibi.Hostname, ibi.NetworkConfig, ibi.ClusterID, ibi.InfraID, ibi.NodeLabels
	if len(ibi.AdditionalNTPSources) > 0 {
		s.NTP = &NTP{Servers: ibi.AdditionalNTPSources}
	}
	var icProblems []strictyaml.Problem
	icPath := filepath.Join(dir, installConfigFile)
	fromInstallConfig := map[string]string{}
	var icDoc *yaml.Node
	if dir != "" {
		icProblems, fromInstallConfig, icDoc = readInstallConfig(icPath, s)
		// config-image also carries DIR/extra-manifests onto the medium. Whatever is there
		// is read as spec.extraManifests is: a symlink to a directory is followed, as the
		// manifest reader follows one to a file, and one to nothing or a file that is no
		// manifest is reported, never silently left off the medium.
		if _, err := os.Lstat(filepath.Join(dir, extraManifestsDir)); err == nil {
			s.ExtraManifests = []string{extraManifestsDir}
		}
	}
	c := &checker{dir: dir}
	sc.validate(c)
	for _, fe := range c.Errs {
		if field, ok := installConfigField(fromInstallConfig, fe.Path); ok {
			line, col := locateField(icDoc, field)
			icProblems = append(icProblems, strictyaml.Problem{File: icPath, Line: line, Col: col, Path: field, Message: fe.Message, Hint: fe.Hint})
			continue
		}
		if !d.Report(ibiPath(fe.Path), fe.Message, fe.Hint) {
			break
		}
	}
	problems := d.Problems()
	if err := d.Err(); err != nil {
		var ve *strictyaml.ValidationErrors
		if errors.As(err, &ve) {
			problems = ve.Problems
		}
	}
	if all := append(problems, icProblems...); len(all) > 0 {
		return nil, &strictyaml.ValidationErrors{Problems: all}
	}
	return sc, nil
}

// installConfigField is the install-config.yaml field a site config path came from: the
// field of the path itself or of the nearest enclosing one.
func installConfigField(from map[string]string, specPath string) (string, bool) {
	for p := specPath; p != ""; p = strictyaml.Parent(p) {
		if field, ok := from[p]; ok {
			return field + strings.TrimPrefix(specPath, p), true
		}
	}
	return "", false
}

// ibiPath is where a site config path's value sits in an ImageBasedConfig.
func ibiPath(specPath string) string {
	for _, m := range ibiPaths {
		if rest, ok := strings.CutPrefix(specPath, m.spec); ok {
			return m.ibi + rest
		}
	}
	return specPath
}

// readInstallConfig takes the cluster name, base domain, pull secret, SSH keys and mirrors
// from install-config.yaml into s. It returns the problems found there (at their
// positions) and, for each site config path it filled, the install-config field it came
// from, and the parsed document (nil when there is none), to place problems in it. No
// install-config.yaml is no problem: the seed keeps its cluster's name.
func readInstallConfig(path string, s *Spec) ([]strictyaml.Problem, map[string]string, *yaml.Node) {
	from := map[string]string{}
	data, err := smallfile.Read(path, MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, from, nil
	}
	if err != nil {
		return []strictyaml.Problem{{File: path, Message: fmt.Sprintf("cannot read the install config: %v", unwrapPathError(err))}}, from, nil
	}
	// The installer reads the file strictly, duplicated keys refused
	// (pkg/asset/imagebased/configimage/installconfig.go loadFromFile, yaml.UnmarshalStrict),
	// and so does this, at any depth, though it decodes only the fields it takes.
	d := strictyaml.NewDecoder(path, "install config", []string{"v1"}, reflect.TypeOf(installConfig{}))
	root, ok := d.ParseDocument(data)
	if !ok || !d.Duplicates(root, "") {
		return d.Problems(), from, nil
	}
	doc := yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	var problems []strictyaml.Problem
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if what, ok := installConfigRefused[k.Value]; ok {
				problems = append(problems, strictyaml.Problem{File: path, Line: k.Line, Col: k.Column, Path: k.Value,
					Message: what + " is " + notSupported, Hint: "leave " + k.Value + " out of " + installConfigFile + " for a seed's site"})
			}
		}
	}
	var ic installConfig
	if err := doc.Decode(&ic); err != nil {
		return append(problems, strictyaml.Problem{File: path, Message: "not an install config: " + err.Error()}), from, &doc
	}
	fill := func(dst *string, v, specPath, field string) {
		if v != "" {
			*dst = v
			from[specPath] = field
		}
	}
	fill(&s.ClusterName, ic.Metadata.Name, "spec.clusterName", "metadata.name")
	fill(&s.BaseDomain, ic.BaseDomain, "spec.baseDomain", "baseDomain")
	fill(&s.PullSecret, strings.TrimSpace(ic.PullSecret), "spec.pullSecret", "pullSecret")
	fill(&s.AdditionalTrustBundle, ic.AdditionalTrustBundle, "spec.additionalTrustBundle", "additionalTrustBundle")
	fill(&s.AdditionalTrustBundlePolicy, ic.AdditionalTrustBundlePolicy, "spec.additionalTrustBundlePolicy", "additionalTrustBundlePolicy")
	if ic.Proxy != nil {
		s.Proxy, from["spec.proxy"] = ic.Proxy, "proxy"
	}
	if s.PullSecret == "" {
		// The installer requires it (pkg/types/validation/installconfig.go
		// ValidateInstallConfig, through pkg/validate/validate.go ImagePullSecret).
		problems = append(problems, installConfigProblem(path, &doc, "pullSecret", "the pull secret is empty or missing", pullSecretHint))
	}
	if ic.FIPS {
		s.FIPS = true
		from["spec.fips"] = "fips"
	}
	for _, line := range strings.Split(ic.SSHKey, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			s.SSHAuthorizedKeys = append(s.SSHAuthorizedKeys, line)
		}
	}
	for i := range s.SSHAuthorizedKeys {
		from[fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i)] = "sshKey"
	}
	for i, src := range ic.ImageDigestSources {
		s.RegistryMirrors = append(s.RegistryMirrors, RegistryMirror{Source: src.Source, Mirrors: src.Mirrors})
		from[fmt.Sprintf("spec.registryMirrors[%d]", i)] = fmt.Sprintf("imageDigestSources[%d]", i)
	}
	return problems, from, &doc
}

// installConfigProblem is a problem at key of install-config.yaml: at the key when the file
// has it, else at the top of the file.
func installConfigProblem(path string, doc *yaml.Node, key, msg, hint string) strictyaml.Problem {
	p := strictyaml.Problem{File: path, Line: 1, Col: 1, Path: key, Message: msg, Hint: hint}
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m := doc.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				p.Line, p.Col = m.Content[i+1].Line, m.Content[i+1].Column
			}
		}
	}
	return p
}

// locateField is where field (a path such as imageDigestSources[0].source) has its value in
// doc, or the nearest enclosing value the file gives; 0, 0 without a document.
func locateField(doc *yaml.Node, field string) (line, col int) {
	if doc == nil || len(doc.Content) != 1 {
		return 0, 0
	}
	n := doc.Content[0]
	line, col = n.Line, n.Column
	for _, seg := range strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' }) {
		var next *yaml.Node
		if i, err := strconv.Atoi(strings.TrimSuffix(seg, "]")); err == nil && strings.HasSuffix(seg, "]") {
			if n.Kind == yaml.SequenceNode && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		} else if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == seg {
					next = n.Content[j+1]
				}
			}
		}
		if next == nil {
			break
		}
		n, line, col = next, next.Line, next.Column
	}
	return line, col
}
