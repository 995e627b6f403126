// Package registry starts a real OCI registry (the distribution registry from
// the Debian docker-registry package) on 127.0.0.1 for tests and the demo.
//
// Each Registry runs in its own process group with its own temporary storage,
// optionally behind htpasswd basic auth and/or TLS with a generated
// self-signed certificate. The registry's access log is parsed so tests can
// assert from the server side what a client fetched (for example that a
// cached pull downloaded zero blob bytes).
package registry
