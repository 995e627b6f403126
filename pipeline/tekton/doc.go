// Package tekton holds the Tekton Tasks and the Pipeline that run snofactory builds on a
// Kubernetes cluster, embedded so tools and tests read exactly the files users apply.
//
// It lives under pipeline/ because it is scheduling integration: Tekton is another way to
// schedule the engine's stages, next to the depot. It is a sibling of the engine, not part of
// it: the engine package never imports it and it imports nothing of the engine. The tasks
// only call the snofactory CLI, so the cache and resume rules are the engine's own.
//
// The stages are split by what they need from the node: snofactory-prepare runs resolve,
// render, live-iso and precache unprivileged; snofactory-factory-vm runs install, validate and
// seal, which boot the factory VM and request the KVM device as a resource instead of
// privileged mode; snofactory-publish pushes the seed and reports IMAGE_URL and IMAGE_DIGEST
// for Tekton Chains. The tasks share the cache and output workspaces, so each task's build
// finds the stages before it cached and runs only its own.
package tekton
