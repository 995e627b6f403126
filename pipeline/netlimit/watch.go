package netlimit

import (
	"context"
	"errors"
	"io"
	"time"
)

// Watchdog bounds a transfer made by a client that takes no transport of ours
// (containers/image): its context is cancelled, with a *StallError as the cause, once no
// progress was reported for the stall timeout. A stall, not a total bound: a large blob
// that keeps moving takes as long as it takes.
type Watchdog struct {
	timer *time.Timer
	stall StallError
	ctx   context.Context
	stop  context.CancelCauseFunc
}

// Watch starts a watchdog over ctx for a transfer from peer (host:port) of kind ("registry"),
// receiving what ("layer"). Pass the returned context to the client; Stop the watchdog when
// the transfer is over.
func Watch(ctx context.Context, kind, peer, what string) (context.Context, *Watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{ctx: ctx, stop: cancel,
		stall: StallError{Kind: kind, Peer: peer, Limit: StallTimeout(ctx), What: what}}
	w.timer = time.AfterFunc(w.stall.Limit, func() {
		e := w.stall
		cancel(&e)
	})
	return ctx, w
}

// Progress restarts the stall timeout: something moved.
func (w *Watchdog) Progress() { w.timer.Reset(w.stall.Limit) }

// Reader is r with each read that returns bytes counted as progress.
func (w *Watchdog) Reader(r io.Reader) io.Reader { return &watchedReader{r: r, w: w} }

// Stop ends the watch and releases its context.
func (w *Watchdog) Stop() {
	w.timer.Stop()
	w.stop(nil)
}

// Err is err, or the stall that caused it: the client's own error then says only that its
// context was cancelled.
func (w *Watchdog) Err(err error) error {
	var se *StallError
	if err != nil && errors.As(context.Cause(w.ctx), &se) {
		return se
	}
	return err
}

type watchedReader struct {
	r io.Reader
	w *Watchdog
}

func (r *watchedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.w.Progress()
	}
	return n, err
}
