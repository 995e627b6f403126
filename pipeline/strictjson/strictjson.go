package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Error is a problem at a place in a document. Line and Col count from 1 (Col in bytes);
// both are 0 when the place is not known (an unknown field: encoding/json does not say
// where).
type Error struct {
	Line, Col int
	Offset    int64 // in bytes from the start; -1 when not known
	Problem   string
	Err       error // what encoding/json said, when it was that
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Problem
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Problem)
}

func (e *Error) Unwrap() error { return e.Err }

// Decode decodes b, which must hold exactly one JSON document, into v. Duplicate keys (at
// any depth), keys v has no field for, and anything but white space after the document
// are errors, as *Error.
func Decode(b []byte, v any) error { return decode(b, v, true) }

// DecodeOpen is Decode for a format whose specification tells readers to ignore fields
// they do not know (OCI manifests and indexes, DSSE envelopes, a registry's config): keys v
// has no field for are skipped, but duplicate keys and trailing data are still errors.
func DecodeOpen(b []byte, v any) error { return decode(b, v, false) }

func decode(b []byte, v any, closed bool) error {
	if err := checkKeys(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if closed {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return located(b, err)
	}
	off := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return at(b, skipSpace(b, off), "data after the JSON document: remove it", nil)
	}
	return nil
}

// Check is Decode without a target: b must be one JSON document without duplicate keys.
// It suits a first look at a document (its version, say) before decoding it for real.
func Check(b []byte) error {
	var raw json.RawMessage
	return Decode(b, &raw)
}

// Position turns a byte offset in b into a line and a column, both from 1.
func Position(b []byte, off int64) (line, col int) {
	off = max(0, min(off, int64(len(b))))
	line = 1 + bytes.Count(b[:off], []byte("\n"))
	col = int(off) - bytes.LastIndexByte(b[:off], '\n')
	return line, col
}

func at(b []byte, off int64, problem string, err error) *Error {
	line, col := Position(b, off)
	return &Error{Line: line, Col: col, Offset: off, Problem: problem, Err: err}
}

// checkKeys walks the document's tokens and refuses the second of two equal keys in one
// object. Syntax errors are left to the decoder, which reports them the same way.
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	type object struct {
		keys map[string]int64
	}
	var stack []*object
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	afterKey := false
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // end of the first document, or a syntax error Decode reports
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &object{keys: map[string]int64{}})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
			afterKey = false
		case string:
			if expectKey() && !afterKey {
				start := keyStart(b, before)
				o := stack[len(stack)-1]
				if first, dup := o.keys[t]; dup {
					line, col := Position(b, first)
					return at(b, start, fmt.Sprintf("duplicate key %q (first at line %d, column %d): remove one of them", t, line, col), nil)
				}
				o.keys[t] = start
				afterKey = true
				continue
			}
			afterKey = false
		default:
			afterKey = false
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

// keyStart is where the key read from offset from begins: its opening quote.
func keyStart(b []byte, from int64) int64 {
	if i := bytes.IndexByte(b[from:], '"'); i >= 0 {
		return from + int64(i)
	}
	return from
}

func skipSpace(b []byte, off int64) int64 {
	for off < int64(len(b)) && strings.IndexByte(" \t\r\n", b[off]) >= 0 {
		off++
	}
	return off
}

// Locate makes an encoding/json error from decoding b an *Error, placed where
// encoding/json says, for a reader that must decode part of a document loosely first.
func Locate(b []byte, err error) error { return located(b, err) }

// located gives a decoding error its place where encoding/json says it.
func located(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return at(b, se.Offset-1, strings.TrimPrefix(err.Error(), "json: "), err) // the offending character
	case errors.As(err, &te):
		return at(b, valueStart(b, te.Offset), strings.TrimPrefix(err.Error(), "json: "), err) // te.Offset is just past the value
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return at(b, int64(len(b)), "the JSON document ends early", err)
	}
	return &Error{Offset: -1, Problem: strings.TrimPrefix(err.Error(), "json: "), Err: err}
}

// valueStart finds where the scalar JSON value ending at end begins.
func valueStart(b []byte, end int64) int64 {
	if end <= 0 || end > int64(len(b)) {
		return end
	}
	i := end - 1
	if b[i] == '"' {
		for i--; i > 0 && (b[i] != '"' || b[i-1] == '\\'); i-- {
		}
		return i
	}
	for i > 0 && !strings.ContainsRune(",:[{ \t\r\n", rune(b[i-1])) {
		i--
	}
	return i
}
