// Package termsafe prints text that came from files, records and registries (a build's
// name in depot.json, a seed's name in seed.json) so that it cannot drive the terminal: an
// escape sequence or a carriage return in a record must not recolour, rewrite or hide
// what the command prints.
package termsafe

import "strconv"

// String returns s unchanged when every character of it is printable (strconv.IsPrint,
// or a plain space) and it holds no quote or backslash; otherwise s quoted as
// strconv.Quote does, its control characters, invalid UTF-8 and bidirectional controls
// escaped. The quotes also tell a reader that the name is not what it looked like.
func String(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}
