// Package handoff holds the typed records stages hand to each other: for each stage that
// others read, the Go type of the output record it writes beside its files (pipeline's
// output.json) and a helper that reads it back for a downstream stage.
//
// A record names files by paths relative to its stage's output folder, so a downstream stage
// never joins a file name into another stage's folder: renaming a file changes one writer,
// and renaming a field breaks every reader at compile time. Each record type knows the stage
// that writes it, so a reader names only the type (Read[Render]) and a stage's Deps are
// derived from the record types it reads (Deps(Render{}, Install{})). The engine stays generic: it
// stores and hands back the JSON; the types live here, with the stages.
package handoff
