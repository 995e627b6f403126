// Package blueprints reads blueprint files: the YAML documents that say what seed to build.
//
// LoadFile parses a file with positions (gopkg.in/yaml.v3 nodes), decodes it strictly into
// the Go types of its apiVersion (package v1alpha1 today; successors get sibling packages,
// and callers name the version's types directly, as Ignition's config/vX_Y packages are),
// applies defaults and validates it, including the files it references. Every problem is
// reported at once, as FILE:LINE:COL: PATH: MESSAGE with a hint where one helps, in a
// *ValidationErrors. Hostile input (alias bombs, deep nesting, huge files) fails fast.
//
// Beyond the types, loading checks what a build would trip over later: referenced files
// exist (a local ISO may be built later if source.generatedBy names the command, see
// v1alpha1.Blueprint.CheckISO), the pull secret is JSON with auths (its content is never
// printed), user Butane fragments translate for the target, and extra manifests are
// Kubernetes objects. The loaded *v1alpha1.Blueprint carries its directory (Dir) and the
// absolute path of every file it references (Resolved).
//
// Schema returns the JSON Schema of the current version, generated from the Go types and
// committed as schema.json for editors (yaml-language-server); REFERENCE.md documents every
// field, with tables generated from the same types.
package blueprints
