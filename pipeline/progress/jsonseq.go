package progress

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/snofactory/snofactory/pipeline"
)

// JSONSeq writes each event as an RFC 7464 JSON text sequence record: RS, JSON, LF.
type JSONSeq struct {
	mu sync.Mutex
	w  io.Writer
}

// NewJSONSeq returns a JSONSeq renderer writing to w.
func NewJSONSeq(w io.Writer) *JSONSeq { return &JSONSeq{w: w} }

// Emit implements pipeline.Sink.
func (j *JSONSeq) Emit(e pipeline.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := make([]byte, 0, len(b)+2)
	rec = append(rec, 0x1e)
	rec = append(rec, b...)
	rec = append(rec, '\n')
	j.w.Write(rec)
}
