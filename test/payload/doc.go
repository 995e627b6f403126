// Package payload generates a synthetic OpenShift release payload and pushes
// it into a registry, for tests, benchmarks and the demo.
//
// The payload follows the real formats closely enough for the resolve and
// precache stages to treat it like a real one: a release image whose layer
// carries /release-manifests/image-references (an image.openshift.io/v1
// ImageStream naming every component by digest), release-metadata
// (cincinnati-metadata-v0) and the coreos-bootimages ConfigMap with CoreOS
// stream metadata pointing at a live ISO; and N component images with the
// layer sharing real payloads have (a few base layers under almost every
// image, mid layers shared by groups, unique top layers), including an
// installer image with /usr/bin/openshift-install (a shell stand-in) and a
// machine-os-images image with /coreos/.
//
// All bytes come from a seeded generator: the same Options give the same
// blobs and the same digests.
package payload
