package pipeline

import (
	"context"
	"io"
	"log/slog"
	"strings"
)

// stageLogHandler writes every record to the stage's log file and forwards Info and above to
// the event stream, so renderers show what matters and the file keeps everything.
type stageLogHandler struct {
	file  slog.Handler
	em    *emitter
	stage string
	attrs []slog.Attr
	red   redactor
}

func newStageLogHandler(w io.Writer, em *emitter, stage string, red redactor) *stageLogHandler {
	return &stageLogHandler{file: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}), em: em, stage: stage, red: red}
}

func (h *stageLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *stageLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		var b strings.Builder
		b.WriteString(r.Message)
		write := func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		}
		for _, a := range h.attrs {
			write(a)
		}
		r.Attrs(write)
		h.em.emit(Event{Kind: EventLog, Stage: h.stage, Level: strings.ToLower(r.Level.String()), Message: h.red.string(b.String())})
	}
	return h.file.Handle(ctx, r)
}

func (h *stageLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &stageLogHandler{file: h.file.WithAttrs(as), em: h.em, stage: h.stage, attrs: append(append([]slog.Attr{}, h.attrs...), as...), red: h.red}
}

func (h *stageLogHandler) WithGroup(name string) slog.Handler {
	return &stageLogHandler{file: h.file.WithGroup(name), em: h.em, stage: h.stage, attrs: h.attrs, red: h.red}
}
