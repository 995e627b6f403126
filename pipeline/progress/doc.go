// Package progress renders the build event stream for people and machines: bars on a
// terminal, timestamped "[blueprint/stage]" lines when output is not a terminal, and an
// RFC 7464 JSON text sequence for Tekton, depot schedulers and other programs.
package progress
