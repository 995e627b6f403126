// Package depot runs many builds on one host: one shared cache (identical stage keys are
// built once, the others wait on the entry's lock and reuse it), resource slots for the
// factory VMs (pipeline.Pool), a disk watermark that holds new builds back, a cap on builds
// in flight, retries with backoff for transient failures (registry, network), and a status
// file kept current so `depot status` can follow a run and a killed depot can be started
// again (finished stages are cache hits). At the end it writes the summary as JSON, JUnit
// and a self-contained HTML report with a per-build stage timeline.
//
// It knows nothing of blueprints or stages: the caller gives it a loader that turns a
// blueprint path into a stage graph.
package depot
