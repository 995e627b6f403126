// Command build-conformance-iso builds (or reuses the cached) conformance OS live ISO.
// It takes the same lock on the output as the tests' conformance.Cached, so running it
// while tests build the ISO waits for them and then finds their result.
//
//	go run ./test/conformance/cmd/build-conformance-iso -o build/conformance/conformance.iso
package main
