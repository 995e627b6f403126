package progress

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/snofactory/snofactory/pipeline"
)

// ForMode is the renderer for a --progress mode: "plain" lines, a "json" text sequence,
// or "auto", bars when w is a terminal and plain lines otherwise. The returned func ends
// the rendering (a terminal's bars are redrawn until then).
func ForMode(mode string, w io.Writer) (pipeline.Sink, func(), error) {
	switch mode {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			t := NewTTY(w)
			return t, t.Close, nil
		}
		return NewPlain(w), func() {}, nil
	case "plain":
		return NewPlain(w), func() {}, nil
	case "json":
		return NewJSONSeq(w), func() {}, nil
	}
	return nil, nil, fmt.Errorf("%q: want auto, plain or json", mode)
}
