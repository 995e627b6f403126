// Package badinput marks an error as the caller's mistake rather than a failure: a
// selection naming no stage, a seed argument that names nothing, a seed the trust policy
// refuses. Commands exit 2 for it, and 1 for anything else, so a depot's scripts can tell
// "fix what you asked for" from "the build failed". It is a leaf, so the seed and site
// packages can mark their errors without linking the engine.
package badinput

import (
	"errors"
	"fmt"
	"strings"
)

// Error is an error caused by what the caller asked for.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf formats an Error.
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Wrap marks err as bad input; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

// Is reports whether err, or an error it wraps, is bad input.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// IsUsage recognizes the errors cobra and pflag make themselves for a command line they
// cannot parse (unknown commands and flags, missing or malformed values): bad input too,
// though not marked as such.
func IsUsage(err error) bool {
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "invalid argument", "flag needs an argument"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}
