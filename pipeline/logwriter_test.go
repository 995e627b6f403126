package pipeline

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// Lines split across writes arrive whole and in order; Flush hands on an unfinished last one.
func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []string // after the writes
		flush  []string // added by Flush
	}{
		{"one line per write", []string{"a\n", "b\n"}, []string{"a", "b"}, nil},
		{"split across writes", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}, nil},
		{"many in one write", []string{"1\n2\n\n3\n"}, []string{"1", "2", "", "3"}, nil},
		{"unfinished last line", []string{"done\nerr", "or: x"}, []string{"done"}, []string{"error: x"}},
		{"nothing", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			w := NewLineWriter(func(s string) { got = append(got, s) })
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("lines = %q, want %q", got, tc.want)
			}
			w.Flush()
			if want := append(slices.Clone(tc.want), tc.flush...); !slices.Equal(got, want) {
				t.Fatalf("after Flush lines = %q, want %q", got, want)
			}
		})
	}
}

// A LineLogger logs each line of a tool's output as a debug record tagged with the tool.
func TestLineLogger(t *testing.T) {
	var buf bytes.Buffer
	w := NewLineLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "xorriso")
	w.Write([]byte("first\nsecond"))
	w.Flush()
	out := buf.String()
	if strings.Count(out, "tool=xorriso") != 2 || !strings.Contains(out, "msg=first") || !strings.Contains(out, "msg=second") {
		t.Fatalf("log = %q, want two debug records tagged tool=xorriso", out)
	}
}
