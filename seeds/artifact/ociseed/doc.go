// Package ociseed moves seed directories (seeds/artifact/seed) to and from OCI registries, OCI
// layouts and oci-archive files, as OCI 1.1 artifacts.
//
// A seed is one artifact manifest: artifactType seed.ArtifactType, the seed manifest
// (seed.json, byte for byte) as its config with media type seed.MediaTypeManifest, and
// as layers every stored file cut into fixed-size chunks (64 MiB by default), each
// annotated with its file name (org.opencontainers.image.title), index and offset.
// Push uploads chunks in parallel and asks the target first whether it already has each
// one (a HEAD on a registry), so re-pushing an unchanged seed sends no blob bytes and a
// push killed mid-way, when re-run, sends only the chunks that had not finished. Pull
// writes chunks at their offsets in a staging directory and records each verified chunk,
// so an interrupted pull resumes; it ends with seed.Verify on the assembled directory.
// Reports (validation.json, run.json) are attached as referrers whose subject is the
// seed. Locations are named as containers/image transports name them: a registry
// reference (optionally docker://), oci:DIR[:TAG] or oci-archive:FILE[:TAG].
package ociseed
