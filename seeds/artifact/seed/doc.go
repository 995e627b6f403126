// Package seed is the on-disk format of a relocatable seed: a directory holding the seed
// manifest (seed.json), the sealed disk in one or more forms (qcow2 with internal
// compression, raw compressed with zstd), optionally the age-encrypted credentials
// bundle, and the SPDX SBOM (seeds/artifact/sbom) of seeds that carry one. The seal stage writes a seed directory with WriteManifest; publish (seeds/artifact/ociseed)
// moves it to and from registries; Verify checks every stored digest and the digest of the
// raw disk bytes a writer puts on a device, and RawReader streams those bytes. The
// manifest's JSON Schema (schema.json) is generated from the Go types.
package seed
