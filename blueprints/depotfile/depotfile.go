package depotfile

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// APIVersion and Kind of a depot file.
const (
	APIVersion = "snofactory.io/v1alpha1"
	Kind       = "Depot"
)

// Depot is a depot file.
type Depot struct {
	// Schema version; must be snofactory.io/v1alpha1.
	APIVersion string `json:"apiVersion" yaml:"apiVersion"`
	// Kind; must be Depot.
	Kind     string   `json:"kind" yaml:"kind"`
	Metadata Metadata `json:"metadata" yaml:"metadata"`
	Spec     Spec     `json:"spec" yaml:"spec"`

	dir string
}

// Metadata names the depot.
type Metadata struct {
	Name string `json:"name" yaml:"name"`
}

// Spec is what the depot builds and with what.
type Spec struct {
	// Blueprints are paths or globs, relative to the depot file.
	Blueprints []string `json:"blueprints" yaml:"blueprints"`
	// Slots bound what the builds' factory VMs hold at once.
	Slots Slots `json:"slots,omitempty" yaml:"slots,omitempty"`
	// ParallelBuilds caps the builds in flight. Default: 4. Like --parallel, at least 1
	// when given.
	ParallelBuilds int `json:"parallelBuilds,omitempty" yaml:"parallelBuilds,omitempty" jsonschema:"minimum=1"`
	// MinFreeDisk holds new builds back while the cache's disk has less free space.
	MinFreeDisk v1alpha1.Size `json:"minFreeDisk,omitempty" yaml:"minFreeDisk,omitempty"`
	// Attempts per build for transient failures (registry, network). Default: 3.
	Attempts int `json:"attempts,omitempty" yaml:"attempts,omitempty" jsonschema:"minimum=1"`
	// Tekton is where depot run --tekton runs the builds; its flags override each setting.
	Tekton *Tekton `json:"tekton,omitempty" yaml:"tekton,omitempty"`
}

// Tekton is the cluster a depot runs on with --tekton; a setting left out is the flag's
// default. Paths are relative to the depot file (Load resolves them).
type Tekton struct {
	// Kubeconfig of the cluster (default $KUBECONFIG, else ~/.kube/config).
	Kubeconfig string `json:"kubeconfig,omitempty" yaml:"kubeconfig,omitempty"`
	// Namespace of the Tasks, the Pipeline and the PipelineRuns (default the context's).
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	// Claim is the PersistentVolumeClaim with subPaths source, cache and output.
	Claim string `json:"claim,omitempty" yaml:"claim,omitempty"`
	// SourceDir is the local copy of the claim's source subPath (default this file's directory).
	SourceDir string `json:"sourceDir,omitempty" yaml:"sourceDir,omitempty"`
	// Image is the snofactory image the tasks run (default the Pipeline's).
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
	// PushSecret and SigningSecret name the Secrets the publish task binds.
	PushSecret    string `json:"pushSecret,omitempty" yaml:"pushSecret,omitempty"`
	SigningSecret string `json:"signingSecret,omitempty" yaml:"signingSecret,omitempty"`
}

// Slots bound the VMs of all builds together; a count left out is no limit (VMs defaults
// to 2). A count given is at least 1, as the flags' are: 0 is never "no limit" or "default".
type Slots struct {
	VMs    int           `json:"vms,omitempty" yaml:"vms,omitempty" jsonschema:"minimum=1"`
	CPUs   int           `json:"cpus,omitempty" yaml:"cpus,omitempty" jsonschema:"minimum=1"`
	Memory v1alpha1.Size `json:"memory,omitempty" yaml:"memory,omitempty"`
}

// MaxFileSize bounds a depot file, and what KindOf peeks at (a depot file or a blueprint):
// real ones are a few KiB, like a blueprint, whose cap this is.
const MaxFileSize = 4 << 20

// Load reads and checks a depot file.
func Load(path string) (*Depot, error) {
	data, err := smallfile.Read(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	d := strictyaml.NewDecoder(path, "depot file", []string{APIVersion}, reflect.TypeOf(Depot{}))
	root, ok := d.Parse(data)
	if !ok {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	dp := &Depot{dir: filepath.Dir(path)}
	d.Decode(root, dp)
	if d.Aborted() {
		return nil, &strictyaml.ValidationErrors{Problems: d.Problems()}
	}
	for _, p := range dp.problems() {
		if !d.Report(p.path, p.msg, p.hint) {
			break
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if t := dp.Spec.Tekton; t != nil {
		t.Kubeconfig, t.SourceDir = dp.rel(t.Kubeconfig), dp.rel(t.SourceDir)
	}
	return dp, nil
}

// rel resolves a path the depot file gives against its directory.
func (dp *Depot) rel(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dp.dir, p)
}

type problem struct{ path, msg, hint string }

func (dp *Depot) problems() []problem {
	var out []problem
	if dp.Kind != Kind {
		out = append(out, problem{"kind", fmt.Sprintf("%q is not %s", dp.Kind, Kind), "a depot file has kind: Depot"})
	}
	if len(dp.Spec.Blueprints) == 0 {
		out = append(out, problem{"spec.blueprints", "names no blueprint", "list blueprint files or globs, e.g. [blueprints/*.yaml]"})
	}
	for i, g := range dp.Spec.Blueprints {
		if _, err := filepath.Match(g, ""); err != nil {
			out = append(out, problem{fmt.Sprintf("spec.blueprints[%d]", i), fmt.Sprintf("%q is not a valid glob: %v", g, err), ""})
		}
	}
	out = append(out, dp.Spec.Tekton.problems()...)
	// Counts below 1 are refused as they are decoded (their jsonschema minimum), as the
	// command line refuses --parallel 0: one rule for both.
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// BlueprintPaths expands the depot's globs relative to its file, in order, each once.
func (dp *Depot) BlueprintPaths() ([]string, error) {
	return Expand(dp.dir, dp.Spec.Blueprints)
}

// Expand expands globs (relative to dir) into files, in order, each once; a glob that
// matches nothing is an error, as a typo would silently build nothing.
func Expand(dir string, globs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		if !filepath.IsAbs(g) {
			g = filepath.Join(dir, g)
		}
		matches, err := filepath.Glob(g)
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("%s matches no blueprint", g)
		}
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out, nil
}
