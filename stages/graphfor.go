package stages

import (
	"fmt"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
	"github.com/snofactory/snofactory/pipeline"
)

// GraphFor wires the stage graph of bp, the blueprint read from path, for a command that
// builds it: the graph's inputs are path and every file bp references, and with publishes
// (the build may run publish) the signing key must open now, not hours into the build.
// Every error is a problem with the blueprint or its options.
func GraphFor(path string, bp *v1alpha1.Blueprint, opts Options, publishes bool) (*pipeline.Graph, pipeline.SecretSource, error) {
	g, secrets, err := Graph(bp, opts)
	if err != nil {
		return nil, nil, err
	}
	if publishes {
		if err := CheckSigning(bp, opts); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	g.Inputs = append([]string{path}, bp.Resolved.Inputs()...)
	return g, secrets, nil
}
