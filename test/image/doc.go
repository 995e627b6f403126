// Package image tests the snofactory container image (the Containerfile at the top of the
// repository) the way a depot builds it: `make image` makes a local Debian base with
// mmdebstrap when it is missing (build-base.sh here), builds the image with buildah (no
// daemon, no registry), and the test runs the binary, a blueprint validation and qemu inside
// the result with `buildah run`.
package image
