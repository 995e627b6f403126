// Package clocktest is a clock.Clock for tests: waits cost no time, the test moves the time
// on by hand (Advance, Set), and it can act at any sleep (cancel the wait, change what is
// waited for).
package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
)

var _ clock.Clock = (*Clock)(nil)

// Clock moves on by what is slept and by what the test advances. OnSleep, when set, runs as
// the nth sleep ends, with the time after it; Sleep then returns the context's error, as a
// real sleep would. Its methods are safe for concurrent use (an engine under test reads the
// time from several goroutines); read T and Sleeps directly only when nothing else runs.
type Clock struct {
	T       time.Time
	Sleeps  int
	OnSleep func(n int, now time.Time)

	mu sync.Mutex
}

// New starts a Clock at t.
func New(t time.Time) *Clock { return &Clock{T: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.T
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.T = t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.T = c.T.Add(d)
}

// Sleep moves the clock on by d.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.T = c.T.Add(d)
	c.Sleeps++
	n, now, on := c.Sleeps, c.T, c.OnSleep
	c.mu.Unlock()
	if on != nil {
		on(n, now)
	}
	return ctx.Err()
}
