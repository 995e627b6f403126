package netlimit

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// A watched transfer fails once nothing moves for the stall timeout, naming the peer and
// what it was sending; one that keeps moving is not bounded.
func TestWatchdog(t *testing.T) {
	ctx := WithStallTimeout(t.Context(), 50*time.Millisecond)
	pr, pw := io.Pipe()
	wctx, w := Watch(ctx, "registry", "r.example:5000", "layer")
	defer w.Stop()
	go func() {
		pw.Write([]byte("some"))
		<-wctx.Done() // then nothing more: the peer stalls
		pw.CloseWithError(wctx.Err())
	}()
	_, err := io.ReadAll(w.Reader(pr))
	err = w.Err(err)
	var se *StallError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "registry r.example:5000 sent no more of the layer for 50ms") {
		t.Errorf("stalled transfer: %v", err)
	}
	if w.Err(nil) != nil {
		t.Error("a success was reported as a stall")
	}

	_, w2 := Watch(t.Context(), "registry", "r", "layer")
	w2.Stop()
	if e := errors.New("x"); w2.Err(e) != e {
		t.Error("a stopped watch reported a stall")
	}
}
