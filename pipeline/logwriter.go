package pipeline

import (
	"bytes"
	"log/slog"
	"sync"
)

// logWriter turns a tool's output into debug log lines of the stage log.
type logWriter struct {
	mu   sync.Mutex
	log  *slog.Logger
	tool string
	buf  []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
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
