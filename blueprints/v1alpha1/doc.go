// Package v1alpha1 is version snofactory.io/v1alpha1 of the blueprint schema: the Go types
// users write in YAML, their defaults (Blueprint.Default) and their validation
// (Blueprint.Validate). Successor versions get sibling packages, with explicit translation
// from this one; package blueprints reads files and picks the version.
package v1alpha1
