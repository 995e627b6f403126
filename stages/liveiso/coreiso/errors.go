package coreiso

import (
	"errors"
	"io/fs"

	"github.com/snofactory/snofactory/pipeline/output"
)

// Sentinel errors, wrapped with the file and detail; test with errors.Is.
var (
	// ErrNotISO: the file is not an ISO 9660 image at all.
	ErrNotISO = errors.New("not an ISO 9660 image")
	// ErrMalformed: an ISO, archive or JSON file is damaged or inconsistent.
	ErrMalformed = errors.New("malformed")
	// ErrNoEmbedArea: the ISO has no Ignition embed area (not a CoreOS-style live ISO).
	ErrNoEmbedArea = errors.New("no Ignition embed area (not a CoreOS live ISO, or too old)")
	// ErrNoKargsArea: the ISO has no kernel-argument embed areas.
	ErrNoKargsArea = errors.New("no kernel-argument embed areas in this ISO")
	// ErrAlreadyEmbedded: a config is embedded and Force was not set.
	ErrAlreadyEmbedded = errors.New("an Ignition config is already embedded (force the replacement with -f/--force, or remove it first)")
	// ErrNoConfig: nothing is embedded.
	ErrNoConfig = errors.New("no Ignition config embedded")
	// ErrTooLarge: the payload does not fit and the ISO cannot be rebuilt around it.
	ErrTooLarge = errors.New("too large for the embed area")
	// ErrUnsupported: the ISO lacks a feature the request needs.
	ErrUnsupported = errors.New("not supported by this ISO")
	// ErrInvalidInput: the request itself is wrong (bad karg syntax, non-JSON config, ...).
	ErrInvalidInput = errors.New("invalid input")
)

// IsBadInput reports whether err is the caller's input being wrong (a missing,
// malformed or read-only file, an ISO without the needed areas, a refused
// replacement), as opposed to a failure of the machine (disk full, xorriso
// crashing).
func IsBadInput(err error) bool {
	for _, e := range []error{ErrNotISO, ErrMalformed, ErrNoEmbedArea, ErrNoKargsArea,
		ErrAlreadyEmbedded, ErrNoConfig, ErrTooLarge, ErrUnsupported, ErrInvalidInput, fs.ErrNotExist, fs.ErrPermission} {
		if errors.Is(err, e) {
			return true
		}
	}
	return output.IsRefused(err)
}
