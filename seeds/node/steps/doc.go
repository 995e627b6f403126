// Package steps is the data form of a node-side sequence (the seal of a seed, its
// reconfiguration at a site): each step's name, the command it runs and what it changes.
// A dry run prints the list; the real run executes the same list, so an engineer reviews
// exactly what a seed does to a node.
package steps
