// Package resolve is the first stage of a build: it pins everything the build reads to a
// digest and writes the result as a lock file (lock.json).
//
// It resolves the release image to a digest, reads /release-manifests/image-references,
// release-metadata and the coreos-bootimages stream from the release image's layers, lists
// every component image by digest, finds the RHCOS live ISO (URL and sha256 from the stream;
// failing that, the machine-os-images component) and extracts openshift-install from the
// installer component for the render stage. A release that ships its ISO only inside
// machine-os-images (/coreos/coreos-<arch>.iso) gets it extracted too, to iso/live.iso,
// checked against the image's own .sha256 file, its sha256 in the lock for live-iso. Extra images are pinned to digests. The same
// lock always means the same inputs: Verify lists every difference between a fresh
// resolution and a lock the user pinned (build --locked).
//
// Day-2 operators come two ways. A bundle image named directly expands to itself plus the
// spec.relatedImages (and the containerImage annotation) of the ClusterServiceVersion under
// /manifests. A package named in a catalog (index) image is looked up in the image's
// file-based catalog (the directory its operators.operatorframework.io.index.configs.v1
// label names, /configs by default): the blueprint's channel, else the package's default
// channel, its head (the entry no other entry replaces or skips) and that bundle's image and
// relatedImages, all pinned by digest. There is no version pinning inside a channel, no
// dependency resolution between operators and no reading of SQLite-era index images.
//
// Registry access goes through containers/image (docker transport), so auth files,
// registries.conf mirrors and insecure registries behave exactly as in podman and skopeo.
// A signature policy (Registry.PolicyFile) is checked on every image resolve opens (release,
// operator bundles and catalogs, the installer and machine-os-images) before any of its
// content is read, since render runs the openshift-install and boots the ISO extracted here.
// containers/image does not retry failed requests, so every registry operation is retried
// here on transient failures (5xx, 429, resets, truncated layers) with backoff.
package resolve
