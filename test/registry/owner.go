package registry

// dirPattern names every registry's private directory in the system temp directory
// (pipeline.OwnedTempDir: locked by its owner, reaped after the owner dies).
const dirPattern = "snofactory-registry-"
