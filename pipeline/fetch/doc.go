// Package fetch downloads large files (live ISOs) into a content-addressed store: verified
// against their sha256 before they enter the store, resumed with HTTP Range requests after
// an interruption, and retried with backoff on transient failures.
package fetch
