// Package precache is the stage that copies every image a node needs into a
// content-addressed blob store shared by all builds of a depot, and packages the images of
// one build as an OCI image layout on a data disk for the factory VM.
//
// The store (a pipeline/blobstore.Store, shared with the live ISO downloads) lives in
// the pipeline's shared directory "blobs": a blob is fetched
// once per depot, verified against its sha256 before it is renamed into the store, and an
// interrupted download is resumed from its partial file with an HTTP Range request, also
// after a crash (kill -9) of the build. Transfers run in parallel (Options.Jobs) and retry
// transient failures (connection resets, 5xx, 429, truncated or corrupt bodies) under the
// project's one retry policy (pipeline/netlimit: jittered backoff, Retry-After honoured),
// per source, trying each ICSP/IDMS or registries.conf mirror in order before the source
// registry; a source that stalls, spends its tries or does not answer hands over to the next.
//
// Library split, and why: registry configuration comes from containers/image, so the stage
// behaves like podman, skopeo and CRI-O on the node: mirrors and insecure registries through
// sysregistriesv2 (registries.conf plus a drop-in generated from Options), credentials from
// the standard auth files through pkg/docker/config, and the signature policy through
// containers/image/signature (checked with containers/image's own docker source before any
// blob is fetched). Blob transfer itself does not go through containers/image: its
// ImageSource.GetBlob has no public way to start at an offset, so it cannot resume a
// partial file left by a killed process, and its copy pipeline writes per-destination
// copies rather than into a store shared across builds. Blobs are therefore fetched with
// plain HTTP requests on go-containerregistry's registry transport, which does the token
// handshake (Basic and Bearer) for a repository and nothing else.
//
// Outputs: layout/ (OCI layout; index.json has one manifest per pinned reference, annotated
// org.opencontainers.image.ref.name; its blobs are hardlinks into the store, so a build copies
// no blob bytes), precache.tar (the data disk the node imports from; its format, writer and
// reader are seeds/contract/precachedisk) and precache-report.json (images, blobs and bytes fetched
// and reused, retries).
//
// Manifest lists are kept byte for byte (so digests match the registry); only the instance
// for the node's platform and its blobs are stored. Docker schema 2 manifests are stored as
// they are, not converted: tools that read the layout must accept Docker media types in an
// OCI index (containers/image >= 5.29 does; Debian 12's skopeo 1.9 sees only OCI-typed ones).
package precache
