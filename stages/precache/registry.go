package precache

import "github.com/snofactory/snofactory/stages/internal/registries"

// Registry is how the stage reaches registries. Nothing in it is secret: the pull secret is
// named here and read through the pipeline's secrets channel.
type Registry = registries.Config

// Mirror is one ICSP/IDMS mirror list.
type Mirror = registries.Mirror
