// Package stages wires a blueprint into the build graph: it maps blueprint fields onto each
// stage's typed options, in pipeline order. It is the one place that knows every stage; the
// stages themselves never import each other, and the engine knows none of them.
//
// Below it, stages/<name> is one stage each and nothing else; stages/internal holds what
// stages share: what they hand each other (handoff records, the lock, registry settings)
// and the factory-VM runner (vm) every stage that boots the node uses (install, validate,
// seal). Outside stages, the VM is reached only through this package: BootSeed (seed
// boot) and Probe (a boot that checks or measures what a build made).
package stages
