// Package sbom writes a seed's software bill of materials: an SPDX 2.3 JSON document
// (github.com/spdx/tools-golang) whose described package is the seed itself, its sealed
// raw disk by digest, containing every container image the seed carries (digest and a
// pkg:oci purl), the OS packages of its installed root as the node's agent listed them
// (pkg:rpm or pkg:deb purls) and the snofactory binaries placed on the node (sha256 and
// version). The seal stage ships it in the seed directory as FileName.
//
// The document is reproducible: nothing in it is random or read from the clock. Its
// creation time is the seed's (SOURCE_DATE_EPOCH through seed.SourceDate), and its
// namespace is derived from the digest of its own content, so the same seed gives the
// same bytes and a different seed a different namespace.
package sbom
