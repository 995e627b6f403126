// Package termsafe prints text that came from files, records and registries (a build's
// name in depot.json, a seed's name in seed.json) so that it cannot drive the terminal: an
// escape sequence or a carriage return in a record must not recolour, rewrite or hide
// what the command prints.
package termsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

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

// Text returns free text (a reason, a problem) with what String would escape escaped, but
// without quotes: quotes and backslashes in a message are its own, and a reader is told
// nothing by quoting the whole of it. Control characters (tabs and newlines too, which
// would break a table's columns or forge a line), invalid UTF-8 and non-printing
// characters are written as Go escapes.
func Text(s string) string {
	if String(s) == s {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == ' ' || r == '"' || r == '\\' || strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}
