// Package docs holds the tests that keep the README and the pages under docs/ true to the
// code without running a VM: every snofactory command a page shows names a real command and
// only flags it has, every repository path and relative link resolves, no page names a
// particular machine's paths, and the generated parts (the command table of
// docs/reference.md, the import graph of docs/architecture.md) match the binary and the
// module. `go test ./test/docs -update` rewrites the generated parts.
package docs
