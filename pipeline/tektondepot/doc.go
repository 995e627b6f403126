// Package tektondepot runs a depot on Tekton (snofactory depot run --tekton): one
// PipelineRun of the embedded Pipeline per blueprint, sharing one claim's cache, at most
// the depot's VM slots at once, recorded in the depot's depot.json like a local depot.
package tektondepot
