// Package handoff holds the typed records stages hand to each other: for each stage that
// others read, the Go type of the output record it writes beside its files (pipeline's
// output.json) and a helper that reads it back for a downstream stage.
//
// A record names files by paths relative to its stage's output folder, so a downstream stage
// never joins a file name into another stage's folder: renaming a file changes one writer,
// and renaming a field breaks every reader at compile time. The engine stays generic: it
// stores and hands back the JSON; the types live here, with the stages.
package handoff
