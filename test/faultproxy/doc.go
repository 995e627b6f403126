// Package faultproxy is an HTTP reverse proxy on 127.0.0.1 that injects
// network faults in front of a test registry: connection resets (before or
// in the middle of a body), 5xx answers (with and without Retry-After), 429,
// truncated bodies and slow links. It can also hold the requests a test picks
// half-way until the test releases them (Options.Hold), so a test kills a client
// mid-transfer on an event rather than a timer.
//
// Which request fails, and how, is a pure function of the seed, the
// request's method and path and how many times that method and path were
// seen before, so a run is reproducible even when a client fetches in
// parallel. The proxy counts what it did so tests can check that faults
// really happened and that the client survived them.
package faultproxy
