// Package testbin builds the snofactory binary once per test process, so end-to-end tests
// exercise exactly what users run: the CLI, its flags and its exit codes.
package testbin
