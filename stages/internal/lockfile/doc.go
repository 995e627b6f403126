// Package lockfile is the lock file format (lock.json), shared by the stages that write and
// read it: resolve writes it, precache and live-iso read it, and `snofactory lock` and
// `build --locked` keep it beside a blueprint.
//
// A lock pins every input of a build: the release image (as named and by digest, with its
// version), every image the node needs by digest (release components, operator bundles and
// their related images, extra images; each tagged with why it is there), the live ISO (URL or
// local path, with its sha256) and the openshift-install binary extracted from the release.
// It is canonical JSON without timestamps, images sorted, so the same inputs give a
// byte-identical file, and it carries a schema version that readers check. Verify lists, one
// line each, how a fresh resolution differs from a pinned lock.
package lockfile
