package checks

import "fmt"

// FieldError is one problem in a document, named by its path in it
// (spec.openshift.clusterNetwork[0].cidr). Checks know paths, not positions: the decoder
// that read the document adds the file position when it reports the error.
type FieldError struct {
	Path    string
	Message string
	Hint    string
}

func (e FieldError) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%s: %s; hint: %s", e.Path, e.Message, e.Hint)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Message)
}

// Report collects the field errors of one document's checks, in the order they are found.
// The zero value is ready to use.
type Report struct {
	Errs []FieldError
}

// Add records a problem at path; hint ("" for none) says how to fix it.
func (r *Report) Add(path, msg, hint string) {
	r.Errs = append(r.Errs, FieldError{Path: path, Message: msg, Hint: hint})
}

// Len is how many problems the report holds, so a check can tell whether its own calls
// found any.
func (r *Report) Len() int { return len(r.Errs) }
