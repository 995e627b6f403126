// Package blueprints reads blueprint files: the YAML documents that say what seed to build.
//
// LoadFile parses a file with positions (gopkg.in/yaml.v3 nodes), decodes it strictly into
// the Go types of its apiVersion (package v1alpha1 today; successors get sibling packages),
// applies defaults and validates it, including the files it references. Every problem is
// reported at once, as FILE:LINE:COL: PATH: MESSAGE with a hint where one helps, in a
// *ValidationErrors. Hostile input (alias bombs, deep nesting, huge files) fails fast.
//
// Schema returns the JSON Schema of the current version, generated from the Go types and
// committed as schema.json for editors (yaml-language-server).
package blueprints
