package tekton

import (
	"embed"
	"io/fs"
)

// PipelineFile is the Pipeline's path in Files; the Tasks are under TasksDir.
const (
	PipelineFile = "pipeline.yaml"
	TasksDir     = "tasks"
)

//go:embed pipeline.yaml tasks/*.yaml
var files embed.FS

// Files returns the Tekton YAML files as they are applied with kubectl.
func Files() fs.FS { return files }
