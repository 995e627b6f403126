package pipeline

import (
	"context"
	"sync"
)

// onWait is a context that calls fn the first time its holder waits on it (asks for Done).
// LockFile and the pin loop look at Done only once the lock they want is taken, so fn runs exactly when a lock is found busy: the test acts on that event
// instead of on a timeout.
type onWait struct {
	context.Context
	once sync.Once
	fn   func()
}

func (c *onWait) Done() <-chan struct{} {
	c.once.Do(c.fn)
	return c.Context.Done()
}

// cancelOnWait is cancelled as soon as its holder waits on it.
func cancelOnWait() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	return &onWait{Context: ctx, fn: cancel}
}
