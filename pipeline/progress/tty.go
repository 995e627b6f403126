package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// TTY draws a bar per progress counter and prints every other event as a line above them.
type TTY struct {
	mu    sync.Mutex
	p     *mpb.Progress
	bars  map[string]*mpb.Bar
	rates rates
}

// NewTTY returns a TTY renderer drawing on w, which should be a terminal. Call Close when the
// build is over so the bars are flushed.
func NewTTY(w io.Writer) *TTY {
	return &TTY{p: mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh(), mpb.WithRefreshRate(150*time.Millisecond)), bars: map[string]*mpb.Bar{}, rates: rates{}}
}

// Emit implements pipeline.Sink.
func (t *TTY) Emit(e pipeline.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Kind == pipeline.EventProgress {
		t.progress(e)
		return
	}
	if e.Kind == pipeline.EventStageDone || e.Kind == pipeline.EventStageFail {
		t.finishBars(e.Stage, e.Kind == pipeline.EventStageFail)
	}
	if line := describe(e, t.rates); line != "" {
		fmt.Fprintf(t.p, "%s [%s] %s\n", e.Time.Local().Format("15:04:05"), prefix(e), line)
	}
}

func (t *TTY) progress(e pipeline.Event) {
	k := e.Stage + "/" + e.Message
	b, ok := t.bars[k]
	if !ok {
		var counter decor.Decorator = decor.CountersNoUnit("%d / %d")
		var speed decor.Decorator = decor.Name("")
		if e.Unit == "bytes" {
			counter = decor.Counters(decor.SizeB1024(0), "% .1f / % .1f")
			speed = decor.AverageSpeed(decor.SizeB1024(0), "% .1f")
		}
		b = t.p.New(e.Total, mpb.BarStyle(),
			mpb.PrependDecorators(decor.Name(fmt.Sprintf("%s %s ", e.Stage, e.Message)), counter),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), speed, decor.Name(" ETA "), decor.AverageETA(decor.ET_STYLE_GO)),
		)
		t.bars[k] = b
	}
	if e.Total > 0 {
		b.SetTotal(e.Total, false)
	}
	b.SetCurrent(e.Done)
	if e.Total > 0 && e.Done >= e.Total {
		b.SetTotal(e.Total, true)
		delete(t.bars, k)
	}
}

func (t *TTY) finishBars(stage string, failed bool) {
	for k, b := range t.bars {
		if len(k) > len(stage) && k[:len(stage)+1] == stage+"/" {
			if failed {
				b.Abort(false)
			} else {
				b.SetTotal(-1, true)
			}
			delete(t.bars, k)
		}
	}
}

// Close completes any open bar and waits for the last frame to be drawn.
func (t *TTY) Close() {
	t.mu.Lock()
	for k, b := range t.bars {
		b.Abort(false)
		delete(t.bars, k)
	}
	t.mu.Unlock()
	t.p.Wait()
}
