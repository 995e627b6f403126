package pipeline

import (
	"bytes"
	"log/slog"
	"sync"
)

// LineWriter is an io.Writer that hands each complete line written to it, without its
// newline, to a function, in order and one at a time. Call Flush when the writer is done, so
// a last line without a newline is not lost.
type LineWriter struct {
	mu   sync.Mutex
	line func(string)
	buf  []byte
}

// NewLineWriter returns a LineWriter calling line with each line.
func NewLineWriter(line func(string)) *LineWriter {
	return &LineWriter{line: line}
}

// Write implements io.Writer.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush passes on what is left of an unfinished last line.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}

// LineLogger is a LineWriter that turns a tool's output into one debug record per line of
// the given logger (the stage log). Call Flush when the tool has exited, so a last line
// without a newline (often the error) is not lost.
type LineLogger struct {
	LineWriter
}

// NewLineLogger returns a LineLogger writing to log, tagging each line with the tool's name.
func NewLineLogger(log *slog.Logger, tool string) *LineLogger {
	return &LineLogger{LineWriter{line: func(s string) { log.Debug(s, "tool", tool) }}}
}
