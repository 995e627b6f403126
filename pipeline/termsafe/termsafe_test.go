package termsafe

import "testing"

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"site-a", "site-a"},
		{"site a/b.c", "site a/b.c"},
		{"café-ü", "café-ü"},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"ok\rFAILED", `"ok\rFAILED"`},
		{"two\nlines", `"two\nlines"`},
		{"bell\a", `"bell\a"`},
		{"\u202eevil", `"\u202eevil"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{`say "hi"`, `"say \"hi\""`},
		{"", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"inputs unchanged", "inputs unchanged"},
		{`input "iso" changed`, `input "iso" changed`},
		{`a\b`, `a\b`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"ok\rFAILED", `ok\rFAILED`},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`},
		{"\u202eevil", `\u202eevil`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"real \uFFFD kept", "real \uFFFD kept"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
