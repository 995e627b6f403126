package sbom

import (
	"fmt"
	"sort"
	"strings"
)

// purl is pkg:TYPE[/NAMESPACE]/NAME[@VERSION][?QUALIFIERS] with each part percent-encoded
// as the package-url spec says: everything but letters, digits, ".-_~" and ':' is
// encoded, and '/' too except between namespace segments and in qualifier values (a
// repository_url). Qualifiers without a value are left out, the rest sorted by key.
func purl(typ, namespace, name, version string, qualifiers map[string]string) string {
	var b strings.Builder
	b.WriteString("pkg:" + typ + "/")
	if namespace != "" {
		for _, seg := range strings.Split(namespace, "/") {
			if seg != "" {
				b.WriteString(purlEscape(seg, false) + "/")
			}
		}
	}
	b.WriteString(purlEscape(name, false))
	if version != "" {
		b.WriteString("@" + purlEscape(version, false))
	}
	var keys []string
	for k, v := range qualifiers {
		if v != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for i, k := range keys {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		b.WriteString(sep + k + "=" + purlEscape(qualifiers[k], true))
	}
	return b.String()
}

func purlEscape(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == '_', c == '~', c == ':', slash && c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
