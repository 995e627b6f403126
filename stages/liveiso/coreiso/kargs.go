package coreiso

import (
	"fmt"
	"slices"
	"strings"
)

// SplitKargs splits a kernel command line into arguments, keeping double-quoted
// spaces inside one argument (as the kernel does: foo="a b").
func SplitKargs(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote := false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			cur.WriteRune(r)
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// KargsEdit is a set of kernel-argument changes, applied in the order
// delete, replace, append (the order coreos-installer documents).
type KargsEdit struct {
	Append []string
	// Delete removes every argument equal to the given one ("quiet", "console=ttyS0").
	// Deleting an argument that is not there is refused, as coreos-installer
	// does: a mistyped argument must not pass for a done edit.
	Delete []string
	// Replace takes KEY=OLD=NEW (replace the value of KEY=OLD with NEW) or, for
	// flags without a value, OLD=NEW where OLD has no "=" of its own.
	Replace []string
}

// Empty reports whether the edit changes nothing.
func (e KargsEdit) Empty() bool {
	return len(e.Append) == 0 && len(e.Delete) == 0 && len(e.Replace) == 0
}

// Apply returns the edited command line.
func (e KargsEdit) Apply(current string) (string, error) {
	args := SplitKargs(current)
	for _, d := range e.Delete {
		if err := checkKarg(d); err != nil {
			return "", err
		}
		n := len(args)
		if args = slices.DeleteFunc(args, func(a string) bool { return a == d }); len(args) == n {
			return "", notPresent("delete", d, d, args)
		}
	}
	for _, r := range e.Replace {
		oldArg, newArg, err := parseReplace(r)
		if err != nil {
			return "", err
		}
		found := false
		for i, a := range args {
			if a == oldArg {
				args[i] = newArg
				found = true
			}
		}
		if !found {
			return "", notPresent("replace", r, oldArg, args)
		}
	}
	for _, a := range e.Append {
		if err := checkKarg(a); err != nil {
			return "", err
		}
		args = append(args, a)
	}
	return strings.Join(args, " "), nil
}

// notPresent is the error for an edit (verb, as given) that needs arg among args.
func notPresent(verb, given, arg string, args []string) error {
	return fmt.Errorf("%w: cannot %s %q: the ISO's kernel arguments have no %q (they are: %s)",
		ErrInvalidInput, verb, given, arg, strings.Join(args, " "))
}

func parseReplace(r string) (oldArg, newArg string, err error) {
	parts := strings.SplitN(r, "=", 3)
	switch len(parts) {
	case 3:
		if parts[0] == "" {
			break
		}
		return parts[0] + "=" + parts[1], parts[0] + "=" + parts[2], nil
	case 2:
		if parts[0] == "" || parts[1] == "" {
			break
		}
		return parts[0], parts[1], checkKarg(parts[1])
	}
	return "", "", fmt.Errorf("%w: replacement %q: want KEY=OLD=NEW (or FLAG=NEWFLAG)", ErrInvalidInput, r)
}

func checkKarg(a string) error {
	if a == "" || len(SplitKargs(a)) != 1 || strings.ContainsAny(a, "\n\x00#") {
		return fmt.Errorf("%w: %q is not a single kernel argument", ErrInvalidInput, a)
	}
	return nil
}
