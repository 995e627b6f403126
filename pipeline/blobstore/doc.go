// Package blobstore is the content-addressed store every download of a depot goes through:
// live ISOs fetched by URL (pipeline/fetch) and registry blobs (stages/precache) alike, so a
// depot keeps one store in its shared directory SharedName.
//
// Layout:
//
//	sha256/<hex>    verified blobs, read-only, never modified (callers may hardlink them)
//	partial/<hex>   downloads in progress or interrupted, each flocked by its writer
//
// Content enters sha256/ only by a rename from partial/ after its digest was checked, so a
// crash never leaves a wrong or truncated blob. The flock on the partial file makes
// concurrent writers of one blob take turns: the first downloads, the next finds the blob
// stored. A partial file outlives its writer, so a killed download resumes at its offset.
// The store knows nothing of what the bytes are; it only checks sha256 digests.
package blobstore
