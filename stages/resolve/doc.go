// Package resolve is the first stage of a build: it pins everything the build reads to a
// digest and writes the result as a lock file (lock.json).
//
// It resolves the release image to a digest, reads /release-manifests/image-references,
// release-metadata and the coreos-bootimages stream from the release image's layers, lists
// every component image by digest, finds the RHCOS live ISO (URL and sha256) and extracts
// openshift-install from the installer component for the render stage. Day-2 operator
// bundles are expanded to the relatedImages of their ClusterServiceVersion, and extra images
// are pinned to digests. The same lock always means the same inputs: Verify lists every
// difference between a fresh resolution and a lock the user pinned (build --locked).
//
// Registry access goes through containers/image (docker transport), so auth files,
// registries.conf mirrors and insecure registries behave exactly as in podman and skopeo.
package resolve
