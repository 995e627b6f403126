package pipeline

import (
	"bytes"
	"log/slog"
	"sync"
)

// LineLogger is an io.Writer that turns a tool's output into one debug record per line of
// the given logger (the stage log). Call Flush when the tool has exited, so a last line
// without a newline (often the error) is not lost.
type LineLogger struct {
	mu   sync.Mutex
	log  *slog.Logger
	tool string
	buf  []byte
}

// NewLineLogger returns a LineLogger writing to log, tagging each line with the tool's name.
func NewLineLogger(log *slog.Logger, tool string) *LineLogger {
	return &LineLogger{log: log, tool: tool}
}

// Write implements io.Writer.
func (w *LineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Debug(string(w.buf[:i]), "tool", w.tool)
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush logs what is left of an unfinished last line.
func (w *LineLogger) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.log.Debug(string(w.buf), "tool", w.tool)
		w.buf = nil
	}
}
