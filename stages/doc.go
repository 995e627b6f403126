// Package stages wires a blueprint into the build graph: it maps blueprint fields onto each
// stage's typed options, in pipeline order. It is the one place that knows every stage; the
// stages themselves never import each other, and the engine knows none of them.
//
// Below it, stages/<name> is one stage each; stages/internal holds what stages hand each
// other (handoff records, the lock, registry settings) and stages/vm the factory-VM runner
// every stage that boots the node shares (install, validate).
package stages
