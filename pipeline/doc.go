// Package pipeline is the snofactory build engine: a graph of stages, a content-addressed
// cache shared by every build of a depot, run records, and the event stream that progress
// renderers consume.
//
// A stage's cache key is a hash chain over its name, version, the canonical JSON of the
// options it reads, the keys and output digests of the stages it consumes, the digests of
// the files it reads and keyed digests (never clear text) of the secrets it reads. Its
// recipe is the same chain without what upstream stages happened to produce or the
// secrets' values: two builds of one blueprint share every recipe, even where a stage's
// output is not bit-for-bit reproducible. Outputs are written to a staging
// directory and renamed into the cache, so a killed build leaves no half-written entry and a
// re-run resumes where it stopped.
//
// The engine knows nothing about OpenShift: stages live in stages/<name> and are wired into a
// graph by the caller.
package pipeline
