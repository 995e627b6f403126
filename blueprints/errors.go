package blueprints

import (
	"reflect"

	"github.com/snofactory/snofactory/seeds/checks/strictyaml"
)

// Problem is one thing wrong with a blueprint, located in its file. Blueprints share the
// strict YAML decoder, and so its problem type, with the other documents users write.
type Problem = strictyaml.Problem

// ValidationErrors is every problem found in one blueprint. LoadFile returns it (as
// *ValidationErrors) whenever the input is at fault.
type ValidationErrors = strictyaml.ValidationErrors

// maxProblems bounds a report: past it, more lines help nobody and cost time.
const maxProblems = strictyaml.MaxProblems

// decoder is the strict decoder of one blueprint file, with the blueprint-specific checks
// (Butane fragments, extra manifests) as its methods.
type decoder struct {
	*strictyaml.Decoder
}

// fieldName is the YAML name of a struct field, or "" when the field is not part of the
// document.
func fieldName(f reflect.StructField) string { return strictyaml.FieldName(f) }
