package progress

import (
	"bytes"
	"testing"
)

func TestForMode(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		want    string // the sink's type
		wantErr string
	}{
		{"auto", "*progress.Plain", ""}, // a buffer is no terminal
		{"plain", "*progress.Plain", ""},
		{"json", "*progress.JSONSeq", ""},
		{"tty", "", `"tty": want auto, plain or json`},
		{"", "", `"": want auto, plain or json`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			sink, done, err := ForMode(tc.mode, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			done()
			if got := typeName(sink); got != tc.want {
				t.Errorf("sink %s, want %s", got, tc.want)
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *Plain:
		return "*progress.Plain"
	case *JSONSeq:
		return "*progress.JSONSeq"
	case *TTY:
		return "*progress.TTY"
	}
	return "?"
}
