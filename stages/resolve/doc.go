// Package resolve is the first stage of a build: it pins everything the build reads to a
// digest and writes the result as a lock file (lock.json).
//
// It resolves the release image to a digest, reads /release-manifests/image-references,
// release-metadata and the coreos-bootimages stream from the release image's layers, lists
// every component image by digest, finds the RHCOS live ISO (URL and sha256 from the stream;
// failing that, the machine-os-images component) and extracts openshift-install from the
// installer component for the render stage. Extra images are pinned to digests. The same
// lock always means the same inputs: Verify lists every difference between a fresh
// resolution and a lock the user pinned (build --locked).
//
// Day-2 operators are simplified: the blueprint names operator bundle images directly, and
// each bundle expands to itself plus the spec.relatedImages (and the containerImage
// annotation) of the ClusterServiceVersion under /manifests. There is no catalog (index
// image or file-based catalog) lookup, no channel or version selection and no dependency
// resolution between operators.
//
// Registry access goes through containers/image (docker transport), so auth files,
// registries.conf mirrors and insecure registries behave exactly as in podman and skopeo.
// containers/image does not retry failed requests, so every registry operation is retried
// here on transient failures (5xx, 429, resets, truncated layers) with backoff.
package resolve
