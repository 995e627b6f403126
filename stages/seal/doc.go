// Package seal is the seal stage: it boots the validated disk once more with a seal
// request, so the node's agent prepares it for relocation (agent.Seal) and powers off,
// then turns the disk into a seed: compressed qcow2 and/or raw+zstd, each with the digest
// of its file and of its raw bytes, an age-encrypted credentials bundle for an OpenShift
// seed, the seed's SPDX SBOM (seeds/artifact/sbom: its images, and the OS packages and snofactory
// binaries the node's agent reported at validation), and the versioned seed manifest
// (seeds/artifact/seed).
package seal
