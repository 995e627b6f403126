// Package waittest holds contexts that report the moment their holder waits on them. The
// lock loops (LockFile, the pin loop, the blob store) ask a context for Done only once the
// lock they want is taken, so a test can act exactly when a lock is found busy instead of
// after a timeout.
package waittest

import (
	"context"
	"sync"
)

// onWait is a context that calls fn the first time its holder asks for Done.
type onWait struct {
	context.Context
	once sync.Once
	fn   func()
}

func (c *onWait) Done() <-chan struct{} {
	c.once.Do(c.fn)
	return c.Context.Done()
}

// CancelOnWait is cancelled as soon as its holder waits on it.
func CancelOnWait() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &onWait{Context: ctx, fn: cancel}
}

// SignalOnWait closes waiting as soon as its holder waits on it; ctx itself never ends.
func SignalOnWait() (ctx context.Context, waiting <-chan struct{}) {
	ch := make(chan struct{})
	return &onWait{Context: context.Background(), fn: func() { close(ch) }}, ch
}
