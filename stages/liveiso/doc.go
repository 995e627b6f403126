// Package liveiso is the live-iso pipeline stage: it takes the Ignition config
// the render stage wrote and a base live ISO (a local file, a download into the
// depot's ISO store, an upstream output, or the ISO an upstream lock pins), and
// writes live.iso with the config, kernel arguments and network keyfiles
// embedded, plus a report of how. The byte-level work (ISO 9660, embed area,
// initrd, kernel-argument areas, rebuilding around an oversized config) is
// package coreiso; this package only wires it into the pipeline.
package liveiso
