// Package fetch downloads large files (live ISOs) by URL into the depot's content store
// (pipeline/blobstore): verified against their sha256 before they enter the store, resumed
// with HTTP Range requests after an interruption (also a killed process, from the store's
// partial file), fetched once when builds ask for the same file at once, and retried with
// backoff on transient failures.
package fetch
