// Package seedtest builds small but real seed directories for tests: a random raw disk with
// holes, stored as zstd and as compressed qcow2 (through qemu-img), an optional credentials
// bundle, and a valid manifest written with seed.WriteManifest.
package seedtest
