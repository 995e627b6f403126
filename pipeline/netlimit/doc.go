// Package netlimit bounds every HTTP exchange the project makes with a peer it does not
// control (registries, the cluster's API server, download servers): a stall timeout (no
// progress for N, sent or received, fails the request naming the peer and N), a cap on each
// response body for what it holds, and one retry policy for transient failures. A dead or
// hostile peer then fails a command in bounded time and memory, with a message that says
// which peer and which limit.
package netlimit
