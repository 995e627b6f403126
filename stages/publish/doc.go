// Package publish is the publish stage: it pushes the sealed seed (seeds/artifact/seed) as an OCI
// artifact (seeds/artifact/ociseed) to the blueprint's registry reference and/or OCI layout, with the
// validation report and the run record attached as referrers.
package publish
