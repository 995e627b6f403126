package blueprints

import (
	"errors"
	"fmt"
	"io"
)

// FileReport is one blueprint file's validation result, as validate --format json lists it.
type FileReport struct {
	File     string    `json:"file"`
	OK       bool      `json:"ok"`
	Problems []Problem `json:"problems,omitempty"`

	invalid *ValidationErrors
}

// CheckFile validates the blueprint in file. Problems with the blueprint are the report's;
// the error is for a file that could not be checked at all.
func CheckFile(file string) (FileReport, error) {
	_, err := LoadFile(file)
	var ve *ValidationErrors
	switch {
	case err == nil:
		return FileReport{File: file, OK: true}, nil
	case errors.As(err, &ve):
		return FileReport{File: file, Problems: ve.Problems, invalid: ve}, nil
	}
	return FileReport{File: file}, err
}

// WriteText prints the report for a person: "FILE: ok" on stdout, or every problem with
// its position on stderr.
func (r FileReport) WriteText(stdout, stderr io.Writer) {
	if r.OK {
		fmt.Fprintf(stdout, "%s: ok\n", r.File)
	} else if r.invalid != nil {
		fmt.Fprintln(stderr, r.invalid.Error())
	}
}
