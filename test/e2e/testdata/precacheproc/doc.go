// Command precacheproc runs one precache of a lock's images into a blob store, as the
// precache stage does, in a process of its own, so tests can SIGKILL it mid-transfer. It
// prints "progress DONE TOTAL" lines for byte progress and, on success, the report as JSON.
package main
