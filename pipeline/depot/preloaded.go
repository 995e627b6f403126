package depot

import (
	"fmt"

	"github.com/snofactory/snofactory/pipeline"
)

// Loaded is one blueprint of a depot, validated and wired.
type Loaded struct {
	Graph   *pipeline.Graph
	Secrets pipeline.SecretSource
}

// Preloaded are a depot's blueprints by path, every one loaded before the run, so that a
// depot never fails late for a bad file and each build runs the blueprint as validated at
// the start, even if its file changes during the run.
type Preloaded map[string]Loaded

// Load is a Loader over the preloaded blueprints; a path not among them is refused.
func (p Preloaded) Load(path string) (*pipeline.Graph, pipeline.SecretSource, error) {
	l, ok := p[path]
	if !ok {
		return nil, nil, fmt.Errorf("%s: not among the depot's validated blueprints", path)
	}
	return l.Graph, l.Secrets, nil
}

// Builds names a build of each path by its blueprint's metadata.name (else its file
// name), made unique (see NameBuilds).
func (p Preloaded) Builds(paths []string) []Build {
	names := map[string]string{}
	for path, l := range p {
		if l.Graph != nil {
			names[path] = l.Graph.Blueprint
		}
	}
	return NameBuilds(paths, names)
}
