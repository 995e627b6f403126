// Package stages wires a blueprint into the build graph: it maps blueprint fields onto each
// stage's typed options, in pipeline order. It is the one place that knows every stage; the
// stages themselves never import each other, and the engine knows none of them.
package stages
